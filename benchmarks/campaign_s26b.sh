# Session 26 (~7 min): the merge kernel above 2 rows again (qwen3-30b-a3b fp8 C4, whose s26a pair tied in device
# time; llama-3.1-8b C16 a second pair), and the decode attention's split count at llama C4 with the kernel merge
# (DGJAX_ATTENTION_PROGRAMS: default 264 -> 9 splits; 132 -> 5; 528 -> 17).
source benchmarks/campaign_lib.sh
l() { run $1 ${2:-100} --preset llama-3.1-8b "${@:3}"; show_tick $1; }
DGJAX_SPLIT_MERGE_ROWS=64 run q4_kern 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 4; show_tick q4_kern
run q4_xla 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 4; show_tick q4_xla
DGJAX_SPLIT_MERGE_ROWS=64 l l16_kern 110 --concurrency 16
l l16_xla 110 --concurrency 16
DGJAX_SPLIT_MERGE_ROWS=64 DGJAX_ATTENTION_PROGRAMS=528 l l4_p528 100 --concurrency 4
DGJAX_SPLIT_MERGE_ROWS=64 DGJAX_ATTENTION_PROGRAMS=132 l l4_p132 100 --concurrency 4
DGJAX_SPLIT_MERGE_ROWS=64 l l4_kern 100 --concurrency 4
for n in q4_kern q4_xla l16_kern l16_xla l4_p528 l4_p132 l4_kern; do
  echo "== $n attention and merge"; grep -hE "^\| \`(loop_select|loop_slice|loop_multiply|split_merge|fused_decode)" $OUT/$n/*.md | cut -d'|' -f2-4
done
cd $OUT && tar czf runs.tgz *.log */*.md && rm -rf */ *.log
