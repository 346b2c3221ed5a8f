# Prepared in session 6 for the next device call (~5 min): can per-layer leaves be packed into one argument
# per kind? host_probe times donated in/out state (the KV caches' share of the call) and chains whose operands
# are static slices of one stacked argument, counting device kernels per call: a copy kernel per slice means
# XLA materializes the slices (then packing only works for XLA-consumed leaves, or with kernels that take a
# layer index). Also tried: XLA's dynamic-slice fusion, which can hand custom calls a slice without a copy.
python3 -m pip install --no-deps -q llguidance-*.whl
for f in "" "--xla_gpu_enable_dynamic_slice_fusion=true"; do
  XLA_FLAGS="$f" timeout 200 python3 -m benchmarks.host_probe --kernels >> $OUT/probe.log 2>&1
done
# The KV pool (one K and one V array for all layers, session 6) against s6d's 2.553 ms/tick for this tick
# with per-layer caches (same flags): the host's share of the 96 caches it removed.
timeout 120 python3 -m benchmarks.host_overhead --preset qwen3-30b-a3b --quantize fp8 >> $OUT/overhead.log 2>&1
timeout 120 python3 -m benchmarks.host_overhead --preset qwen3-30b-a3b >> $OUT/overhead.log 2>&1
# Attention at one stream spends ~9 µs per layer (kernel + split merge) for ~0.5 µs of KV reads at 1 K context:
# time the fused decode kernel at the split counts the engine could pick (default at a 2064-token table: 33).
timeout 150 python3 -m benchmarks.fused_decode_check --batches 1,4 --contexts 1024 --max-len 2064 \
    --splits 0,1,2,4,8,16 > $OUT/splits.log 2>&1
grep -E "us/call|ms/tick|Error" $OUT/probe.log $OUT/overhead.log | cut -c1-160
grep -E "^\| (llama|qwen3)" $OUT/splits.log
