# Session 26 (~6 min): the new attention grid target (one program an SM at 4+ rows) where s26b/d did not look:
# llama-3.1-8b C4 at 8K context, new default (5 splits of 128 keys) vs the old target (DGJAX_ATTENTION_PROGRAMS=264:
# 9 splits); then C16 and C1 at 1K with this session's defaults, for the record.
source benchmarks/campaign_lib.sh
l() { run $1 ${2:-100} --preset llama-3.1-8b "${@:3}"; show_tick $1; }
B="--contexts 8192 --prefill 2048 --decode-tokens 128 --trace-tokens 8"
l l4k8_new 110 --concurrency 4
DGJAX_ATTENTION_PROGRAMS=264 l l4k8_old 110 --concurrency 4
B="--contexts 1024 --prefill 2048 --decode-tokens 192 --trace-tokens 8"
l l16 100 --concurrency 16
l l1 90 --concurrency 1
for n in l4k8_new l4k8_old l16 l1; do
  echo "== $n attention and merge"; grep -hE "^\| \`(split_merge|fused_decode)" $OUT/$n/*.md | cut -d'|' -f2-4
done
cd $OUT && tar czf runs.tgz *.log */*.md && rm -rf */ *.log
