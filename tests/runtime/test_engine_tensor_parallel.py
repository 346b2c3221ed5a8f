"""The whole engine on a 2-device tensor-parallel mesh (fake CPU devices) answers like one device."""

from __future__ import annotations

import json
import os
import subprocess
import sys


SCRIPT = r"""
import json, os, sys
from dgjax.llm import LLM
from dgjax.runtime.types import SamplingParams
sys.path.insert(0, sys.argv[1])
from engine_harness import MODEL_DIR, small_engine_config
out = {}
for tp in (1, 2):
    llm = LLM(MODEL_DIR, small_engine_config(tensor_parallel=tp, max_concurrency=2, decode_buckets=(2,),
                                             prefill_buckets=(16,)))
    outs = llm.generate(["The with statement", "A class definition"],
                        SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True))
    out[tp] = [o.token_ids for o in outs]
    llm.close()
out["attention"] = os.environ.get("DGJAX_ATTENTION")
print(json.dumps(out))
"""


def test_tensor_parallel_engine_matches_single_device():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    env.pop("DGJAX_ATTENTION", None)
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", SCRIPT, here], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["1"] == out["2"]
    assert all(len(t) == 8 for t in out["2"])
    assert out["attention"] == "ref"  # the sharded engine keeps the single-device kernels out
