# Session 17, call 2: fp8 tiles on the CUDA cores (DGJAX_FP8_DOT=fma: per-row products summed along K, no
# (First try: the sweeps lost their tables to a missing --out folder and q_fma ran out of its 75 s in compiles.)
# tensor-core dot) against the default f16 tensor-core dot: launch sweeps of the dense GEMV and the MoE stages,
# then qwen3-30b-a3b fp8 C1 through the engine both ways (fma first).
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
CASES="qwen3 experts,glm experts,qwen3 qkv,qwen3 o,glm qkv"
for mode in fma f16; do
  DGJAX_FP8_DOT=$mode timeout 120 python3 -m benchmarks.launch_sweep --budget-s 45 --fmts fp8 --wide --cases "$CASES" \
    --out $OUT/sweep_$mode > $OUT/sweep_$mode.log 2>&1
  echo "== sweep $mode ($SECONDS s)"; sed -n '/best per case/,$p' $OUT/sweep_$mode.log | head -40
done
DGJAX_FP8_DOT=fma run q_fma 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_fma
run q_f16 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_f16
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)
