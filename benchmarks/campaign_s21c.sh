# Session 21 (~8 min): fp8 x fp8 dots with x as two e4m3 terms (DGJAX_FP8_DOT=a8x2). a8 (x rounded to one e4m3
# term per row and 128 inputs) made qwen3-30b-a3b fp8 C1 5.7% faster in the engine (s16d) but put ~3% error on
# the largest outputs, so it stayed opt-in. a8x2 adds the rounded residual as a second fp8 dot on the same
# weight tile: x kept to about bf16's precision, the weight tile still unconverted. First the MoE kernel alone
# (error against the exact reference, µs) under f16 / a8 / a8x2, then the engine interleaved f16 / a8x2.
BUDGET_S=${BUDGET_S:-540}
source benchmarks/campaign_lib.sh
for mode in f16 a8 a8x2; do
  DGJAX_FP8_DOT=$mode timeout 90 python3 -m benchmarks.moe_kernel_check --preset qwen3-30b-a3b --formats fp8 \
    --tokens 1,4 > $OUT/kernel_$mode.log 2>&1
  echo "== kernel $mode rc $? ($SECONDS s)"; grep -E "^\| qwen3" $OUT/kernel_$mode.log | cut -d'|' -f4,7-9,14-15
done
q() { run $1 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick $1; }
for i in 1 2; do
  q q_f16_$i
  DGJAX_FP8_DOT=a8x2 q q_a8x2_$i
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
