# Session 3, call 4 (2026-12-01): issue 4's fp8 presets after the leaf-by-leaf conversion at load. glm-4.5-air
# fp8 needs ~110 GB: more than the 75% of the H200 that XLA takes by default, hence the memory fraction.
L=$OUT/campaign.log
timeout 130 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 --contexts 1024 --concurrency 1 \
    --prefill 2048 --decode-tokens 64 --out $OUT > $L 2>&1
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 timeout 240 python3 -m benchmarks.decode_bench --preset glm-4.5-air --quantize fp8 \
    --contexts 1024 --concurrency 1 --prefill 2048 --decode-tokens 64 --out $OUT >> $L 2>&1
grep -E "^\| (1024|2048)|load \+ compile" $OUT/*.md | cut -c1-260
grep -E "Error|error:|Traceback" $L | head -5
