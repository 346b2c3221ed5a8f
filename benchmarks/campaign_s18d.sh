# Session 18, on the warm machine of campaign_s18c (compile cache hot): glm-4.5-air fp8 C1 again, vector first
# this time, then the scalar fp8 scale (auto).
BUDGET_S=${BUDGET_S:-300}
source benchmarks/campaign_lib.sh
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
DGJAX_FP8_SCALE=vector run glm_vec2 120 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick glm_vec2
run glm_auto2 120 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick glm_auto2
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)
