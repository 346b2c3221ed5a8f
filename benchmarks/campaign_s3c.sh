# Session 3, call 3 (2026-12-01): is the MoE/fp8 decode tick host-bound because Pallas (Triton) kernels
# are left out of XLA's command buffers (CUDA graphs)? Tiny-width presets under three flag settings, then
# the real qwen3-30b-a3b under the flag if it is accepted.
L=$OUT/campaign.log
: > $L
TRITON='--legacy_command_buffer_custom_call_targets=__gpu$xla.gpu.triton'
for flags in "" "--xla_gpu_enable_command_buffer=" "$TRITON"; do
  for args in "--preset qwen3-30b-a3b" "--preset qwen3-30b-a3b --quantize fp8"; do
    XLA_FLAGS="$flags" timeout 100 python3 -m benchmarks.host_overhead $args --tokens 200 >> $L 2>&1 \
      || echo "FAILED: [$flags] $args" >> $L
  done
done
XLA_FLAGS="$TRITON" timeout 100 python3 -m benchmarks.host_overhead --preset llama-3.1-8b --tokens 200 >> $L 2>&1
timeout 100 python3 -m benchmarks.host_overhead --preset llama-3.1-8b --tokens 200 >> $L 2>&1
grep -E "leaves|FAILED" $L
XLA_FLAGS="$TRITON" timeout 130 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 \
    --concurrency 1,4 --decode-tokens 64 --out $OUT/triton-graphs >> $L 2>&1
XLA_FLAGS="$TRITON" timeout 110 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 --contexts 1024 \
    --concurrency 1 --decode-tokens 64 --out $OUT/triton-graphs >> $L 2>&1
grep -E "^\| 1024" $OUT/triton-graphs/*.md
