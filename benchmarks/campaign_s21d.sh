# Session 21's second a8x2 call (~8 min). s21c's a8x2 ran its two e4m3 terms as two dots per tile: as accurate
# as f16 (moe_kernel_check rel err 4.9e-3 vs a8's 4.9e-2) but no faster in the engine (gate/up 547 vs 537 µs a
# tick). Now the residual rows are 16 more columns of the same dot (N = 32, one wgmma). The kernel check for its
# error, then qwen3 fp8 C1 interleaved f16 / a8x2, a8 last as the one-term control where time is left.
BUDGET_S=${BUDGET_S:-480}
source benchmarks/campaign_lib.sh
DGJAX_FP8_DOT=a8x2 timeout 90 python3 -m benchmarks.moe_kernel_check --preset qwen3-30b-a3b --formats fp8 \
  --tokens 1,4 > $OUT/kernel_a8x2.log 2>&1
echo "== kernel a8x2 rc $? ($SECONDS s)"; grep -E "^\| qwen3" $OUT/kernel_a8x2.log | cut -d'|' -f4,7-9,14-15
q() { run $1 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick $1; }
q q_f16_1
DGJAX_FP8_DOT=a8x2 q q_a8x2_1
q q_f16_2
DGJAX_FP8_DOT=a8x2 q q_a8x2_2
DGJAX_FP8_DOT=a8 q q_a8_1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
