# Prepared in session 15 for session 16 (~9 min), once campaign_s16a.sh shows qwen3's slow mode gone: the
# launch-cutting fusions that earlier sessions timed as losses on qwen3-30b-a3b fp8 C1, when about half of all
# processes fell in the slow mode (~8% slower, unrelated to the switch: XLA re-recording the decode graph every
# tick, s15d). Each is one run against the default runs around it; device busy a tick and the edges say more
# than tok/s alone. Greedy fingerprints: equal ones only say the same tokens came out (the fused paths round
# differently, so unequal ones are not errors by themselves; benchmarks.greedy_diff says where they part).
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
q() { run $1 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick $1; }
q q_1
DGJAX_ADD_NORM=kernel q q_add_norm
DGJAX_QUANT_GEMV_FUSE=all q q_gemv_fuse_all
q q_2
DGJAX_FP8_DOT=a8 q q_fp8_a8  # s12e: kernels 5-10% faster, the engine 338.4 vs 365.5: a slow-mode-sized gap
DGJAX_MOE_FUSE=all q q_moe_fuse_all
q q_3
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
