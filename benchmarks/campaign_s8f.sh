# Session 8, call 4 (~8.5 min), after s8e. With the new defaults, qwen3-30b-a3b bf16 C1 ran 299.6 tok/s on
# 3.13 ms of device time per tick (s7c: 323.0 on 3.16), and glm-4.5-air fp8 ran 143.4 on 6.73 (s7c: 150.3 on
# 6.75): the same device time, a longer tick. qwen3 fp8 and llama did not show it. Session 7's host-side
# change was FlatCall, so it is A/B'd here on those two presets: first the host cost of a tiny-width tick,
# then the engines.
BUDGET_S=520
source benchmarks/campaign_lib.sh
for v in 1 0; do
  DGJAX_FLAT_CALL=$v timeout 90 python3 -m benchmarks.host_overhead --preset qwen3-30b-a3b \
      --label "bf16 DGJAX_FLAT_CALL=$v" >> $OUT/overhead.log 2>&1
done
grep -E "ms/tick|Error" $OUT/overhead.log
run qwen3_bf16 110 --preset qwen3-30b-a3b --concurrency 1
DGJAX_FLAT_CALL=0 run qwen3_bf16_noflat 90 --preset qwen3-30b-a3b --concurrency 1
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 DGJAX_FLAT_CALL=0 run glm_noflat 110 --preset glm-4.5-air --quantize fp8 --concurrency 1
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm 100 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
