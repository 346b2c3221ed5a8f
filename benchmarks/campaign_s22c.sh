# Session 22 (~9 min): bf16 rows carried as f16 into the fp8 kernels (dgjax/pallas/carrier.py, new default):
# q/k/v (the input norm's fusion writes f16), o (the split merge writes f16), the experts' gate/up where the model
# has no shared expert (the post-attention norm's fusion) and the experts' / MLP down (the activation's fusion),
# so those kernels skip their per-step rescaling of x (s22a: 0.5-0.8 µs a GEMV). qwen3-30b-a3b fp8 C1 interleaved on / off (DGJAX_F16_CARRY), then glm-4.5-air fp8 C1 on / off.
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
q() { run $1 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick $1; }
g() { XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run $1 110 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick $1; }
q q_on_1
DGJAX_F16_CARRY=off q q_off_1
q q_on_2
DGJAX_F16_CARRY=off q q_off_2
g g_on_1
DGJAX_F16_CARRY=off g g_off_1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
