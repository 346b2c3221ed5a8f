# Prepared in session 8 for session 9 (~8 min): the tick rate that varied between runs at equal device time
# (glm-4.5-air fp8 C1: 143.4-143.6 tok/s in three runs, 150.5 in one; qwen3-30b-a3b bf16 C1: 299.6 and 323.0).
# Three runs of each. decode_bench now also reports 'host ms/dispatch': the median host time inside the engine's
# decode dispatch. Its share of the tick interval says whether a slow run's extra time is spent enqueuing the
# tick or around it (waiting on and processing the previous tick).
BUDGET_S=540
source benchmarks/campaign_lib.sh
for i in 1 2 3; do
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_$i 95 --preset glm-4.5-air --quantize fp8 --concurrency 1
  run qwen3_bf16_$i 75 --preset qwen3-30b-a3b --concurrency 1
done
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
