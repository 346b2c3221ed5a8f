# Session 18, on the warm machine of campaign_s18c/d (compile cache hot): qwen3-30b-a3b fp8 C1, scalar fp8 scale
# (auto) and per-column (vector) alternated, two each, to see the pair outside the slow mode and how often it comes.
BUDGET_S=${BUDGET_S:-300}
source benchmarks/campaign_lib.sh
for i in 1 2; do
  DGJAX_FP8_SCALE=vector run q_vec_$i 70 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_vec_$i
  run q_auto_$i 70 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_auto_$i
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)
