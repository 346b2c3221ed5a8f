# Prepared in session 11 for session 12 (~4 min): glm-4.5-air fp8 C1 with its experts' down stage in 2 K splits
# (DGJAX_MOE_DOWN_SPLITS=2: 6 + 5 of its 11 steps) against unsplit, interleaved twice. The s11c sweep: 21.8 µs a
# layer against 23.5-25.2; on qwen3 a split down had turned the residual add into a reduce fusion and lost in
# the engine (s9f), so only the engine decides.
BUDGET_S=${BUDGET_S:-330}
source benchmarks/campaign_lib.sh
for i in 1 2; do
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_$i 100 --preset glm-4.5-air --quantize fp8 --concurrency 1
  DGJAX_MOE_DOWN_SPLITS=2 XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_down2_$i 100 --preset glm-4.5-air \
      --quantize fp8 --concurrency 1
done
grep -h "moe_down" $OUT/glm_1/*.md $OUT/glm_down2_1/*.md | head -4
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
