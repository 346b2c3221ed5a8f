# Prepared in session 5 for the next device call: the fp8 tiles with the float16 dot (DGJAX_FP8_DOT=f16,
# `tiles.f16_rows`) against the default, first as trace-timed launch sweeps at the width-2 shapes, then in
# the engine (qwen3-30b-a3b fp8 and glm-4.5-air fp8, C1). Flip the default if the engine agrees. Last, the
# bf16 engine's device time per tick after the softmax-free routing (session 4: 3.23 ms, session 5: 3.24).
python3 -m pip install --no-deps -q llguidance-*.whl
for mode in x f16; do
  DGJAX_FP8_DOT=$mode timeout 170 python3 -m benchmarks.launch_sweep --budget-s 70 --out $OUT --fmts fp8 \
      --cases "glm experts,qwen3 experts,glm qkv,qwen3 qkv" > $OUT/sweep_$mode.log 2>&1
  mv $OUT/launch_sweep.md $OUT/launch_sweep_$mode.md
  echo "== sweep $mode"; grep -E "\| (both|gemv) \|" $OUT/launch_sweep_$mode.md | sort -t'|' -k2,2 -k6n | awk -F'|' 'a[$2]++<2 {print $2,$5,$6,$9,$10}'
done
for mode in x f16; do
  DGJAX_FP8_DOT=$mode timeout 110 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 \
      --contexts 1024 --concurrency 1 --prefill 2048 --decode-tokens 64 --trace-tokens 8 --out $OUT/qwen3_$mode > $OUT/qwen3_$mode.log 2>&1
  echo "== qwen3 fp8 $mode"; grep -E "^\| 1024|Error" $OUT/qwen3_$mode/*.md $OUT/qwen3_$mode.log | head -2
done
