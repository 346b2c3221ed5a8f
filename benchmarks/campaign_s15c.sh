# Prepared in session 14 for session 15 (~7 min): 1) qwen3-30b-a3b fp8's softmax selection as one Pallas kernel
# (DGJAX_MOE_ROUTING=kernel) against XLA's fusions once more: s8d and s11i had it lose (325.0 vs 355.2, 348.4 vs
# 363.8) with equal device time, which is what the slow mode looks like; here three interleaved pairs, with the
# greedy fingerprints (the same experts, but weights within ~1e-7 of XLA's may round
# differently later, so only equal fingerprints say something) and the launch edges that tell the modes
# apart. 2) llama-3.1-8b C4 and C16 at 1K with today's defaults (C4 last read 878.6 before the PDL triggers).
BUDGET_S=${BUDGET_S:-540}
source benchmarks/campaign_lib.sh
show() { grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'; grep -h "^Greedy tokens" $OUT/$1/*.md
         grep -h -A8 "Launch edges" $OUT/$1/*.md | grep '^| [a-z]*>' ; }
for i in 1 2 3; do
  run q_$i 90 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show q_$i
  DGJAX_MOE_ROUTING=kernel run q_kernel_$i 70 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show q_kernel_$i
done
run llama_c4 80 --preset llama-3.1-8b --concurrency 4; show llama_c4
run llama_c16 80 --preset llama-3.1-8b --concurrency 16; show llama_c16
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
