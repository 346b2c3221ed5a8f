# Session 26 (~8 min): the fused decode attention's grid target at 4 and 16 streams (DGJAX_ATTENTION_PROGRAMS;
# default 264 = two programs an SM), with the merge kernel now default at every width: llama-3.1-8b C4 132 vs
# default (two pairs; s26b had 907.6 vs 895.1), C16 132 vs default, qwen3-30b-a3b fp8 C4 132 vs default.
source benchmarks/campaign_lib.sh
l() { run $1 ${2:-100} --preset llama-3.1-8b "${@:3}"; show_tick $1; }
DGJAX_ATTENTION_PROGRAMS=132 l l4_p132 100 --concurrency 4
l l4_def 100 --concurrency 4
l l4_def2 100 --concurrency 4
DGJAX_ATTENTION_PROGRAMS=132 l l4_p132b 100 --concurrency 4
DGJAX_ATTENTION_PROGRAMS=132 l l16_p132 110 --concurrency 16
l l16_def 110 --concurrency 16
run q4_def 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 4; show_tick q4_def
DGJAX_ATTENTION_PROGRAMS=132 run q4_p132 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 4; show_tick q4_p132
for n in l4_p132 l4_def l4_def2 l4_p132b l16_p132 l16_def q4_def q4_p132; do
  echo "== $n attention and merge"; grep -hE "^\| \`(split_merge|fused_decode)" $OUT/$n/*.md | cut -d'|' -f2-4
done
cd $OUT && tar czf runs.tgz *.log */*.md && rm -rf */ *.log
