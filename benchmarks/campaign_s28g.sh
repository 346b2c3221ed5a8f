# Session 28: llama-3.1-8b C1 at 4K context end to end, the new one-stream launch (128-key steps, 17 splits) against
# the old (DGJAX_ATTENTION_BLOCK_TOKENS=64: 64-key steps, the same 17 splits).
source benchmarks/campaign_lib.sh
B="--contexts 4096 --prefill 2048 --decode-tokens 192 --trace-tokens 8"
run l4k_new 120 --preset llama-3.1-8b --concurrency 1; show_tick l4k_new
DGJAX_ATTENTION_BLOCK_TOKENS=64 run l4k_old 120 --preset llama-3.1-8b --concurrency 1; show_tick l4k_old
grep -hE "^\| \`fused_decode|^\| \`split_merge" $OUT/l4k_new/*.md $OUT/l4k_old/*.md | cut -d'|' -f2-4 | head -4
cd $OUT && tar czf runs.tgz *.log */*.md 2>/dev/null; rm -rf */ *.log
