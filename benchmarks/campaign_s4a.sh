# Session 4, call 2: qwen3-30b-a3b engine runs (traced): bf16 default vs the routing kernel, fp8 at width 2.
python3 -m pip install --no-deps -q llguidance-*.whl
L=$OUT/campaign.log
timeout 150 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 --concurrency 1,4 \
    --decode-tokens 64 --trace-tokens 8 --out $OUT/default > $L 2>&1
DGJAX_MOE_ROUTING=kernel timeout 150 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 \
    --concurrency 1,4 --decode-tokens 64 --trace-tokens 8 --out $OUT/routing-kernel >> $L 2>&1
timeout 150 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 --contexts 1024 --concurrency 1 \
    --decode-tokens 64 --trace-tokens 8 --out $OUT/fp8 >> $L 2>&1
grep -E "Error|error:" $L | head; for f in $OUT/*/*.md; do echo $f; grep -E "^\| 1024" $f; done
