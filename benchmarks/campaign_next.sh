# Next GPU campaign (prepared 2026-12-01, end of session 3). Split over two device calls (each < 10 min):
#   bash benchmarks/campaign_next.sh 1    and    bash benchmarks/campaign_next.sh 2
# Carry the llguidance wheel (device has no network): run(carry=[llguidance-*.whl]) and
#   python3 -m pip install --no-deps llguidance-*.whl
set -x
L=$OUT/campaign.log
if [ "$1" = 1 ]; then
  # the routing kernel: same experts as ref.py? µs per layer vs the jnp selection
  timeout 120 python3 -m benchmarks.moe_routing_check > $L 2>&1
  # the MoE decode kernel's new default launch (no K splits) at 1-16 tokens, bf16 and fp8
  timeout 120 python3 -m benchmarks.moe_kernel_check --preset qwen3-30b-a3b --tokens 1,2,4,16 >> $L 2>&1
  # fp8 experts still split K to fill the GPU: does the bf16 finding (no split) hold for them?
  timeout 100 python3 -m benchmarks.moe_kernel_check --preset qwen3-30b-a3b --formats fp8 --tokens 1 --sweep \
      --sweep-tokens 1 >> $L 2>&1
  # qwen3-30b-a3b bf16: default vs routing kernel forced (flip moe_routing GPU_VALIDATED if it wins and agrees)
  timeout 130 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 --concurrency 1,4 \
      --decode-tokens 64 --out $OUT/default >> $L 2>&1
  DGJAX_MOE_ROUTING=kernel timeout 130 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 \
      --concurrency 1,4 --decode-tokens 64 --out $OUT/routing-kernel >> $L 2>&1
  grep -E "^\| " $L | tail -30; grep -hE "^\| 1024" $OUT/*/*.md
else
  # fp8 presets now that a single slot decodes at width 2
  timeout 130 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 --contexts 1024 --concurrency 1 \
      --decode-tokens 64 --out $OUT > $L 2>&1
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 timeout 240 python3 -m benchmarks.decode_bench --preset glm-4.5-air --quantize fp8 \
      --contexts 1024 --concurrency 1 --decode-tokens 64 --out $OUT >> $L 2>&1
  # the fused decode kernel now shares the online-softmax step (its empty-row guard became m == -inf
  # instead of !isfinite(m); the paged decode/prefill kernels lower to the same ops as before)
  timeout 100 python3 -m benchmarks.fused_decode_check >> $L 2>&1
  # dense regression check after the MoE changes (llama C1 was 236.7 tok/s)
  timeout 150 python3 -m benchmarks.decode_bench --preset llama-3.1-8b --contexts 1024 --concurrency 1 \
      --decode-tokens 64 --out $OUT >> $L 2>&1
  grep -hE "^\| 1024" $OUT/*.md
fi
