# Prepared in session 13 for session 14 (~9 min): expert selection inside the MoE decode kernel's gate/up stage
# (DGJAX_MOE_ROUTING=fused, dgjax/pallas/moe_decode/routed.py). Deviceless (jax 0.10.2) it takes qwen3-30b-a3b
# fp8's layer from 20 launches to 14 (XLA's routing fusions go); the price is a ranking of the token's logits
# before each gate/up program's first weight load. 1) the kernel against the selection + MoE decode kernel on
# the GPU (same experts, weights, output; µs per layer of both); 2) qwen3 fp8 C1 and glm fp8 C1, default
# against fused, interleaved.
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
show() { grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'; }
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 timeout 150 python3 -m benchmarks.moe_routed_check --tokens 1,2 \
    > $OUT/routed_check.log 2>&1
echo "== routed check: rc $?"; grep -E "^\| (qwen3|glm)" $OUT/routed_check.log
for i in 1 2; do
  run q_$i 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show q_$i
  DGJAX_MOE_ROUTING=fused run q_fused_$i 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show q_fused_$i
done
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
run g_1 150 --preset glm-4.5-air --quantize fp8 --concurrency 1; show g_1
DGJAX_MOE_ROUTING=fused run g_fused_1 120 --preset glm-4.5-air --quantize fp8 --concurrency 1; show g_fused_1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
