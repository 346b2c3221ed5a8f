# Session 4, call 5: the GEMV kernel (qkv with the input norm fused, o) and the one-kernel split merge, checked
# against their references on the GPU, then the engine: qwen3-30b-a3b bf16 C1/C4 and llama-3.1-8b C1/C4/C1-8K.
python3 -m pip install --no-deps -q llguidance-*.whl
L=$OUT/campaign.log
timeout 90 python3 -m benchmarks.gemv_check --rows 2 4 > $L 2>&1
timeout 80 python3 -m benchmarks.fused_decode_check --batches 1,4 --contexts 1024,8192 >> $L 2>&1
timeout 150 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 --concurrency 1,4 \
    --decode-tokens 64 --trace-tokens 8 --out $OUT/qwen3 >> $L 2>&1
timeout 200 python3 -m benchmarks.decode_bench --preset llama-3.1-8b --split-engines --contexts 1024,8192 \
    --concurrency 1,4 --decode-tokens 64 --trace-tokens 8 --out $OUT/llama >> $L 2>&1
grep -E "^\| |Error" $L | grep -v "^| 1024\|^| 8192" | tail -24; for f in $OUT/*/*.md; do echo $f; grep -E "^\| (1024|8192)" $f; done
