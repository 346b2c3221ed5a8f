# Prepared in session 7 (~9 min). First, the quantized GEMV's decode fusions (fused input norm, SplitSums into
# the fused attention), A/B in the engine: the fused norm's prologue re-reads x over all of K before the weight
# stream, latency that made the bf16 GEMV's fused norm lose to XLA in session 4; if `norm` loses here too,
# DGJAX_QUANT_GEMV_NORM=late runs the dot on x*g and applies the row scale to the accumulator (no prologue).
# Then the fused decode attention's split count at the engine's table width (2064 tokens: default 33 splits
# at one stream), timed from the device trace this time (s7a's wall-clock numbers were dispatch). At 1K
# context a qwen3 tick spends ~8.6 µs per layer in attention + split merge.
python3 -m pip install --no-deps -q llguidance-*.whl
END=$((SECONDS + 570))
B="--preset qwen3-30b-a3b --quantize fp8 --concurrency 1 --contexts 1024 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
fuse() { name=fuse_$1${DGJAX_QUANT_GEMV_NORM:+_$DGJAX_QUANT_GEMV_NORM}; left=$((END - SECONDS))
         [ $left -lt 70 ] && { echo "== $name skipped"; return; }
         DGJAX_QUANT_GEMV_FUSE=$1 timeout $((left < 110 ? left : 110)) python3 -m benchmarks.decode_bench $B \
             --out $OUT/$name > $OUT/$name.log 2>&1
         echo "== $name"; grep -hE "^\| 1024|Error" $OUT/$name/*.md $OUT/$name.log | head -2 | cut -d'|' -f2-9,12-16; }
fuse all
fuse none
timeout 180 python3 -m benchmarks.fused_decode_check --batches 1,4 --contexts 1024 --max-len 2064 \
    --splits 0,1,2,4,8,16 > $OUT/splits.log 2>&1
grep -E "^\| (llama|qwen3)|Error" $OUT/splits.log
DGJAX_QUANT_GEMV_NORM=late fuse all
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
