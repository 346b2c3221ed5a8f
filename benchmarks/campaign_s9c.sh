# Session 9 (~9 min): the fp8 tiles' dot with the operands swapped (DGJAX_FP8_DOT=swap: the converted weight
# tile is the dot's M, so Triton issues Hopper's wgmma m64n16k16 instead of mma.sync m16n8k16 with 2 of 16
# rows real; seen in the PTX of XLA's deviceless compile) against the default f16 dot. First trace-timed
# launch sweeps at the width-2 shapes, then the engine at one stream.
BUDGET_S=570
source benchmarks/campaign_lib.sh
for mode in f16 swap; do
  DGJAX_FP8_DOT=$mode timeout 150 python3 -m benchmarks.launch_sweep --budget-s 50 --out $OUT --fmts fp8 \
      --cases "glm experts,qwen3 experts,glm qkv,qwen3 qkv,qwen3 o" > $OUT/sweep_$mode.log 2>&1
  mv $OUT/launch_sweep.md $OUT/launch_sweep_$mode.md
  echo "== sweep $mode ($SECONDS s)"; grep -E "\| (both|gemv|down|gate_up) \|" $OUT/launch_sweep_$mode.md | sort -t'|' -k2,2 -k4,4 -k6n | awk -F'|' 'a[$2 $4]++<1 {print $2,$4,$5,$6,$9,$10}'
done
run qwen3_fp8_f16 80 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_FP8_DOT=swap run qwen3_fp8_swap 80 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_FP8_DOT=swap XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_swap 100 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
