"""DGJAX_L2_PREFETCH=attention in a tiny fp8 Qwen3 with joined q/k/v (test_f16_carry's model: 16-row fp8 blocks,
head_dim 32): each layer but the last prefetches the next layer's q/k/v and o weights (dgjax/pallas/l2_prefetch,
interpreted) and the next layer's q/k/v GEMV kernel takes the prefetch results as unread operands; prefill and
decode logits are exactly the mode-off model's, and "off" traces no prefetch."""

from __future__ import annotations

import jax
import numpy as np
from dense_cases import PROMPT
from paged_runner import PagedRunner
from test_f16_carry import _fp8_model

from dgjax.pallas.l2_prefetch import api as prefetch_api
from dgjax.pallas.quant_gemv import api as gemv_api


def test_prefetched_layers_decode_exactly_alike(tmp_path, monkeypatch):
    cfg, params, mesh = _fp8_model(tmp_path)
    monkeypatch.setenv("DGJAX_ATTENTION", "kernel")
    monkeypatch.setenv(gemv_api.ENV_VAR, "kernel")  # the GEMV kernel (interpreted) takes `after` operands
    monkeypatch.setattr(prefetch_api, "_on_gpu", lambda: True)
    calls = {"prefetch": 0, "after": 0}
    real_prefetch, real_gemv = prefetch_api.kernel.l2_prefetch, gemv_api.kernel.quant_gemv

    def counted_prefetch(*args, **kwargs):
        calls["prefetch"] += 1
        return real_prefetch(*args, **kwargs)

    def counted_gemv(*args, **kwargs):
        calls["after"] += len(kwargs.get("after", ()))
        return real_gemv(*args, **kwargs)

    monkeypatch.setattr(prefetch_api.kernel, "l2_prefetch", counted_prefetch)
    monkeypatch.setattr(gemv_api.kernel, "quant_gemv", counted_gemv)
    import paged_runner

    step = paged_runner.step_logits.__wrapped__
    logits, counts = {}, {}
    for mode in ("off", "attention"):
        calls.update(prefetch=0, after=0)
        monkeypatch.setenv(prefetch_api.ENV_VAR, mode)  # read at trace time: trace afresh for each
        monkeypatch.setattr(paged_runner, "step_logits", jax.jit(lambda p, kv, b, cfg: step(p, kv, b, cfg),
                                                                 static_argnames=("cfg",)))
        runner = PagedRunner(cfg, params, mesh, seed=3)
        seen = [runner.prefill("s", PROMPT)]
        token = [PROMPT[-1]]
        for _ in range(3):
            out = runner.step([("s", token)], 1)[0]
            seen.append(out)
            token = [int(np.argmax(out[-1]))]
        logits[mode], counts[mode] = seen, dict(calls)
    assert counts["off"] == {"prefetch": 0, "after": 0}
    # a decode trace: two prefetches (q/k/v, o) for each layer after the first, taken by that layer's q/k/v GEMV
    assert counts["attention"]["prefetch"] == 2 * (cfg.num_hidden_layers - 1) > 0
    assert counts["attention"]["after"] == counts["attention"]["prefetch"]
    for got, want in zip(logits["attention"], logits["off"]):
        np.testing.assert_array_equal(got, want)
