# Next GPU session, call 3 of 3 (~9.5 min; rewritten in session 8). The dense and bf16 presets on the current
# defaults: llama-3.1-8b C1/4/16 (s7c: 229.7 / 913.8 / 3232.4) and qwen3-30b-a3b bf16 C1/4 (s7c: 323.0 at C1).
# Then the fused decode attention's split count at the engine's table width (2064 tokens: 33 splits at one
# stream by default), timed from the device trace. Last, the H200's own decode HLO for qwen3 fp8, to check
# benchmarks/deviceless_hlo.py's per-layer count (13 there, the router dot counted twice) against the GPU's.
python3 -m pip install --no-deps -q llguidance-*.whl
END=$((SECONDS + 570))
B="--contexts 1024 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
run() { name=$1; t=$2; shift 2; left=$((END - SECONDS)); [ $left -lt 60 ] && { echo "== $name skipped"; return; }
        [ $t -gt $left ] && t=$left
        timeout $t python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
        echo "== $name ($SECONDS s)"; grep -hE "^\| 1024|Error" $OUT/$name/*.md $OUT/$name.log | head -3 | cut -d'|' -f2-9,12-16; }
Q="--preset qwen3-30b-a3b --quantize fp8 --concurrency 1"
run llama 110 --preset llama-3.1-8b --concurrency 1,4,16
run qwen3_bf16 110 --preset qwen3-30b-a3b --concurrency 1,4
left=$((END - SECONDS)); [ $left -gt 90 ] && timeout $((left < 180 ? left - 30 : 150)) python3 -m benchmarks.fused_decode_check \
    --batches 1,4 --contexts 1024 --max-len 2064 --splits 0,1,2,4,8,16 > $OUT/splits.log 2>&1
grep -E "^\| (llama|qwen3)|Error" $OUT/splits.log
left=$((END - SECONDS)); [ $left -gt 40 ] && timeout $left python3 -m benchmarks.dump_decode_hlo --preset qwen3-30b-a3b \
    --quantize fp8 --out $OUT/hlo > $OUT/layer_launches.txt 2>&1; head -30 $OUT/layer_launches.txt | cut -c1-150
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
