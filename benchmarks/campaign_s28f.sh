# Session 28: the one-stream bucket's 128-key steps for splits of 192-384 table keys (s28e) checked: kernel alone
# at the new default against 64-key steps (llama heads at 4K unmeasured before), then qwen3-30b-a3b fp8 C1 at 8K
# end to end, new default against the old launch (DGJAX_ATTENTION_BLOCK_TOKENS=64 gives it back: same 33 splits).
source benchmarks/campaign_lib.sh
timeout 150 python3 -m benchmarks.fused_decode_check --shapes llama-3.1-8b,qwen3-30b-a3b,glm-4.5-air --batches 1 \
  --padding-row --contexts 4096 --max-len 4160 --block-tokens 0,64 > $OUT/k4k.log 2>&1
echo "== k4k ($SECONDS s)"; grep -E "^device|^\| (llama|qwen|glm)|Error" $OUT/k4k.log | cut -d'|' -f2-5,10-12
timeout 100 python3 -m benchmarks.fused_decode_check --shapes qwen3-30b-a3b,glm-4.5-air --batches 1 \
  --padding-row --contexts 8192 --max-len 8416 --block-tokens 0,64 > $OUT/k8k.log 2>&1
echo "== k8k ($SECONDS s)"; grep -E "^device|^\| (llama|qwen|glm)|Error" $OUT/k8k.log | cut -d'|' -f2-5,10-12
B="--contexts 8192 --prefill 2048 --decode-tokens 192 --trace-tokens 8"
run q8k_new 150 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q8k_new
DGJAX_ATTENTION_BLOCK_TOKENS=64 run q8k_old 150 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q8k_old
grep -hE "^\| \`fused_decode|^\| \`split_merge" $OUT/q8k_new/*.md $OUT/q8k_old/*.md | cut -d'|' -f2-4 | head -4
cd $OUT && tar czf runs.tgz *.log */*.md 2>/dev/null; rm -rf */ *.log
