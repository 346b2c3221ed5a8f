# Second half of campaign_s6a (split to fit one 10-minute device call each): glm-4.5-air fp8 C1 with the
# float16 fp8 dot, and the bf16 qwen3 engine's device time per tick after the softmax-free routing.
python3 -m pip install --no-deps -q llguidance-*.whl
DGJAX_FP8_DOT=f16 XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 timeout 200 python3 -m benchmarks.decode_bench --preset glm-4.5-air \
    --quantize fp8 --contexts 1024 --concurrency 1 --prefill 2048 --decode-tokens 64 --trace-tokens 8 --out $OUT/glm > $OUT/glm.log 2>&1
echo "== glm fp8 f16"; grep -E "^\| 1024|Error" $OUT/glm/*.md $OUT/glm.log | head -2
timeout 110 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 --concurrency 1 \
    --prefill 2048 --decode-tokens 64 --trace-tokens 8 --out $OUT/qwen3_bf16 > $OUT/qwen3_bf16.log 2>&1
echo "== qwen3 bf16"; grep -E "^\| 1024|Error" $OUT/qwen3_bf16/*.md $OUT/qwen3_bf16.log | head -2
