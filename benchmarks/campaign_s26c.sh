# Session 26 (~8 min): stream-K launches of the quantized GEMV (quant_gemv/stream_k.py) against the grid default,
# at the engine's one-stream width (2 rows): bf12 at llama-3.1-8b's four projections, fp8 at glm-4.5-air's q/k/v
# and o and llama's gate/up and down. 132 / 264 / 396 programs, 64 and 128 columns.
# Ran at commit b1e0ecd; the stream-K launch lost (benchmarks/results/2026-12-04-s26c-*) and was removed after it.
python3 -m pip install --no-deps -q llguidance-*.whl
python3 -m benchmarks.quant_gemv_check --formats bf12 --rows 2 --sweep --stream-programs 132 264 396 \
  --budget-s 230 2>&1 | grep -v "^jax._src" | tee $OUT/bf12.log
python3 -m benchmarks.quant_gemv_check --formats fp8 --shapes glm_qkv glm_o gate_up down --rows 2 --sweep \
  --stream-programs 132 264 396 --budget-s 230 2>&1 | grep -v "^jax._src" | tee $OUT/fp8.log
