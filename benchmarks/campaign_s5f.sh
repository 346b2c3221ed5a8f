# Session 5, call 6: the session's defaults in the engine - qwen3-30b-a3b bf16 C1 (K-split XLA dots for the
# small projections), qwen3-30b-a3b fp8 C1 and glm-4.5-air fp8 C1 (FP8_SMALL_BATCH MoE launches).
python3 -m pip install --no-deps -q llguidance-*.whl
timeout 115 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 --concurrency 1 \
    --prefill 2048 --decode-tokens 64 --trace-tokens 8 --out $OUT/qwen3 > $OUT/qwen3.log 2>&1
echo "== qwen3 bf16 rc=$?"; grep -E "^\| 1024|Error|HBM read" $OUT/qwen3/*.md $OUT/qwen3.log | head -4
timeout 125 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 --contexts 1024 --concurrency 1 \
    --prefill 2048 --decode-tokens 64 --trace-tokens 8 --out $OUT/qwen3fp8 > $OUT/qwen3fp8.log 2>&1
echo "== qwen3 fp8 rc=$?"; grep -E "^\| 1024|Error|HBM read" $OUT/qwen3fp8/*.md $OUT/qwen3fp8.log | head -4
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 timeout 210 python3 -m benchmarks.decode_bench --preset glm-4.5-air --quantize fp8 \
    --contexts 1024 --concurrency 1 --prefill 2048 --decode-tokens 64 --trace-tokens 8 --out $OUT/glm > $OUT/glm.log 2>&1
echo "== glm rc=$?"; grep -E "^\| 1024|Error|HBM read" $OUT/glm/*.md $OUT/glm.log | head -4
