# Prepared in session 7 (~9 min), for two untimed changes:
# 1. decode ticks through FlatCall (dgjax/runtime/flat_call.py: the parameters' buffers flattened once and fed
#    straight to the runtime executable), A/B against jax's ordinary call (DGJAX_FLAT_CALL=0), first on the
#    host-bound tiny-width tick, then in the engines;
# 2. the input RMSNorm inside the quantized GEMV (fp8 qkv) and qkv's split-K partials summed inside the fused
#    decode attention (SplitSums): in the kernel table, `quant_gemv_fp8_rmsnorm_*` should replace
#    `quant_gemv_fp8_*_s4_*`, and a norm fusion and a reduce fusion per layer should be gone (qwen3: ~96 launches). Compare with s7c/s7e
# (qwen3 fp8 315.0 / 313.3 tok/s with dispatch 3.24 / 3.20 ms and device 2.95 ms per tick; glm fp8 150.3;
# llama C1 229.7, C16 3232.4).
python3 -m pip install --no-deps -q llguidance-*.whl
for v in 1 0; do
  DGJAX_FLAT_CALL=$v timeout 100 python3 -m benchmarks.host_overhead --preset qwen3-30b-a3b --quantize fp8 \
      --label "DGJAX_FLAT_CALL=$v" >> $OUT/overhead.log 2>&1
done
grep -E "ms/tick|Error" $OUT/overhead.log
B="--contexts 1024 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
END=$((SECONDS + 570))
run() { name=$1; t=$2; shift 2; left=$((END - SECONDS)); [ $left -lt 60 ] && { echo "== $name skipped"; return; }
        [ $t -gt $left ] && t=$left
        timeout $t python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
        echo "== $name ($SECONDS s)"; grep -E "^\| 1024|Error" $OUT/$name/*.md $OUT/$name.log | head -3 | cut -d'|' -f2-9,12-16; }
run qwen3_fp8 130 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_FLAT_CALL=0 run qwen3_fp8_noflat 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
# What each of a layer's ~14 launches covers, on the GPU's own fusion decisions (full HLO in hlo/decode.hlo.txt).
[ $((END - SECONDS)) -gt 50 ] && timeout $((END - SECONDS)) python3 -m benchmarks.dump_decode_hlo --preset qwen3-30b-a3b \
    --quantize fp8 --out $OUT/hlo > $OUT/layer_launches.txt 2>&1; head -40 $OUT/layer_launches.txt | cut -c1-150
run llama 110 --preset llama-3.1-8b --concurrency 1,4,16
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm 130 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
