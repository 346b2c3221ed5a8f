# Session 22 (~5.5 min): a second interleaved pair each of qwen3-30b-a3b fp8 C1 and glm-4.5-air fp8 C1 with the
# f16 carry on / off (s22c: qwen3 343.5 / 342.7 vs 332.7 / 332.9 tok/s, all four in the slow mode; glm 185.9 vs
# 174.9, whose greedy tokens differ between the two: f16 subnormals below 6e-5, see dgjax/pallas/carrier.py).
BUDGET_S=${BUDGET_S:-330}
source benchmarks/campaign_lib.sh
q() { run $1 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick $1; }
g() { XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run $1 110 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick $1; }
DGJAX_F16_CARRY=off g g_off_2
g g_on_2
DGJAX_F16_CARRY=off q q_off_3
q q_on_3
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
