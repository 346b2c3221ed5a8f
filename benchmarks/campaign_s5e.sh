# Ran at commit 6135827; its probe options (--fmts fp8-probe, DGJAX_FP8_DECODE) were removed after the runs (no gain).
# Session 5, call 5: fp8 read as uint32 words (DGJAX_FP8_DECODE=words) - the launch sweep at the width-2
# decode shapes, then qwen3-30b-a3b fp8 and glm-4.5-air fp8 engines (C1) with it.
python3 -m pip install --no-deps -q llguidance-*.whl
export DGJAX_FP8_DECODE=words
timeout 200 python3 -m benchmarks.launch_sweep --budget-s 75 --out $OUT --fmts fp8 \
    --cases "glm experts,qwen3 experts,glm qkv,glm o,qwen3 qkv,qwen3 o" > $OUT/words.log 2>&1
echo "== sweep rc=$?"; grep "read ceiling" $OUT/words.log | head -1
grep -E "\| (both|gemv) \|" $OUT/launch_sweep.md | grep -v "fma\|n/a" | sort -t'|' -k2,2 -k6n | awk -F'|' 'a[$2]++<3 {print $2,$5,$6,$9,$10}'
timeout 150 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 --contexts 1024 --concurrency 1 \
    --prefill 2048 --decode-tokens 64 --trace-tokens 8 --out $OUT/qwen3 > $OUT/qwen3.log 2>&1
echo "== qwen3 rc=$?"; grep -E "^\| 1024|Error" $OUT/qwen3/*.md $OUT/qwen3.log | head -4
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 timeout 200 python3 -m benchmarks.decode_bench --preset glm-4.5-air --quantize fp8 \
    --contexts 1024 --concurrency 1 --prefill 2048 --decode-tokens 64 --trace-tokens 8 --out $OUT/glm > $OUT/glm.log 2>&1
echo "== glm rc=$?"; grep -E "^\| 1024|Error" $OUT/glm/*.md $OUT/glm.log | head -4
