"""benchmarks.hlo_fusions reads a real XLA dump (CPU) and finds fusions under their trace names."""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

from benchmarks.hlo_fusions import describe, hlo_names

PROGRAM = """
import jax, jax.numpy as jnp
f = jax.jit(lambda x, y: (jnp.tanh(x @ y).sum(0), jnp.exp(x).sum(1), jnp.sin(y @ x).max(0), jnp.cos(x + 1).sum(1)))
jax.block_until_ready(f(jnp.ones((64, 64)), jnp.ones((64, 64))))
"""


def test_trace_names_resolve_to_dotted_hlo_fusions_in_a_real_dump(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text")
    subprocess.run([sys.executable, "-c", PROGRAM], check=True, env=env, timeout=120)
    text = "".join(open(p).read() for p in glob.glob(str(tmp_path / "*after_optimizations.txt")))
    dotted = re.findall(r"^\s*%?(\w+\.\d+) = .*calls=", text, re.MULTILINE)
    assert dotted, "the dump has no numbered fusion"
    trace_name = dotted[0].replace(".", "_")  # how a profiler trace spells it
    assert hlo_names(trace_name) == [trace_name, dotted[0]]
    out = describe(str(tmp_path), trace_name)
    assert out.startswith(f"{trace_name} = ") and "not found" not in out
    assert len(out.splitlines()) > 1  # the called computation's ops follow
    assert describe(str(tmp_path), "no_such_kernel_7").endswith("not found in the dump")
