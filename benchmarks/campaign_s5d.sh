# Ran at commit b810848; its probe options (--fmts fp8-probe, DGJAX_FP8_DECODE) were removed after the runs (no gain).
# Session 5, call 4: fp8 decode probes - integer bit decode of e4m3 into bf16 bit patterns ("bits") and the
# raw byte load alone ("u8", wrong values) against Triton's cast, on the tensor-core path.
python3 -m pip install --no-deps -q llguidance-*.whl
for mode in bits u8; do
  DGJAX_FP8_DECODE=$mode timeout 250 python3 -m benchmarks.launch_sweep --budget-s 90 --out $OUT --fmts fp8 \
      --cases "glm experts,qwen3 experts,glm qkv,qwen3 qkv" > $OUT/$mode.log 2>&1
  mv $OUT/launch_sweep.md $OUT/launch_sweep_$mode.md
  echo "== $mode rc=$?"; grep -E "read ceiling" $OUT/$mode.log; grep -E "\| (both|gemv) \|" $OUT/launch_sweep_$mode.md | grep -v fma | sort -t'|' -k2,2 -k6n | awk -F'|' '{print $2,$5,$6,$9,$10}' | awk '!seen[$1 $2]++' | head -4
  grep -E "\| (both|gemv) \|" $OUT/launch_sweep_$mode.md | grep -v fma | sort -t'|' -k2,2 -k6n | awk -F'|' 'a[$2]++<3 {print $2,$5,$6,$9,$10}'
done
