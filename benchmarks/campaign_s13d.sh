# Session 13, call d (~9.5 min), with early PDL triggers now the default (s13c):
# 1) qwen3-30b-a3b fp8 C1, the default (down unsplit) against DGJAX_MOE_DOWN_SPLITS=2, interleaved twice: session
#    12's pair was confounded by the fast/slow modes that the trigger removed;
# 2) llama-3.1-8b C16 1K, the attention default (3 splits x 128 keys) against DGJAX_ATTENTION_PROGRAMS=528
#    (5 x 128), interleaved twice (the s13b question: engine trace 24.4 µs a layer vs sweep 22.6);
# 3) glm-4.5-air fp8 C1 with the trigger (default) and without, if time remains.
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
show() { grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'; }
for i in 1 2; do
  run qwen3_$i 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show qwen3_$i
  DGJAX_MOE_DOWN_SPLITS=2 run qwen3_down2_$i 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
  show qwen3_down2_$i
done
for i in 1 2; do
  run llama_c16_$i 90 --preset llama-3.1-8b --concurrency 16
  DGJAX_ATTENTION_PROGRAMS=528 run llama_c16_p528_$i 90 --preset llama-3.1-8b --concurrency 16
done
grep -h "fused_decode_attention\|split_merge" $OUT/llama_c16_1/*.md $OUT/llama_c16_p528_1/*.md | grep "^| \`" | head -6
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
run glm_1 150 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_1
DGJAX_PDL_TRIGGER=off run glm_off_1 120 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_off_1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
