# Session 13, call e (~8 min): which Pallas kernels should trigger their PDL dependents early. s13c: llama-3.1-8b C1
# +1.0 / +1.2 tok/s with every kernel triggering (only attention and its merge are Pallas there); s13d: glm-4.5-air
# fp8 C1 166.6 with against 169.1 without (one pair), and qwen3-30b-a3b fp8 C1 still bimodal with it (333.8,
# 333.7 slow). Here glm and qwen3 with all kernels triggering (auto), none (off), and only the attention and
# its merge (kernels:fused_decode_attention,split_merge), interleaved.
BUDGET_S=${BUDGET_S:-470}
source benchmarks/campaign_lib.sh
show() { grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'; }
ATTN=kernels:fused_decode_attention,split_merge
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
for i in 1 2; do
  run glm_auto_$i 150 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_auto_$i
  DGJAX_PDL_TRIGGER=off run glm_off_$i 120 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_off_$i
  DGJAX_PDL_TRIGGER=$ATTN run glm_attn_$i 120 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_attn_$i
done
unset XLA_PYTHON_CLIENT_MEM_FRACTION
DGJAX_PDL_TRIGGER=$ATTN run qwen3_attn_1 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show qwen3_attn_1
DGJAX_PDL_TRIGGER=off run qwen3_off_1 90 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show qwen3_off_1
run qwen3_auto_1 90 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show qwen3_auto_1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
