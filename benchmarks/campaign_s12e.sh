# Session 12 (~9 min): fp8 x fp8 dots on Hopper's fp8 tensor cores (DGJAX_FP8_DOT=a8). Pallas' Triton
# lowering left tt.dot's maxNumImpreciseAcc at 0, so Triton never issued wgmma for e4m3 operands: it
# converted both tiles to f16 for mma.sync (dgjax/pallas/fp8_mma.py). a8 rounds x to e4m3 per row and K step
# (W8A8 block fp8, as vLLM/SGLang run fp8 checkpoints) and multiplies the raw weight tile: no conversions.
# First the trace-timed launch sweeps at the width-2 shapes (f16 vs a8), then the engine at one stream.
BUDGET_S=570
source benchmarks/campaign_lib.sh
for mode in f16 a8; do
  DGJAX_FP8_DOT=$mode timeout 150 python3 -m benchmarks.launch_sweep --budget-s 50 --out $OUT --fmts fp8 --wide \
      --cases "glm experts,qwen3 experts,glm qkv,qwen3 qkv,qwen3 o" > $OUT/sweep_$mode.log 2>&1
  mv $OUT/launch_sweep.md $OUT/launch_sweep_$mode.md
  echo "== sweep $mode ($SECONDS s)"; grep -E "\| (both|gemv|down|gate_up) \|" $OUT/launch_sweep_$mode.md | sort -t'|' -k2,2 -k4,4 -k6n | awk -F'|' 'a[$2 $4]++<1 {print $2,$4,$5,$6,$9,$10}'
done
run qwen3_f16 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_FP8_DOT=a8 run qwen3_a8 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_FP8_DOT=a8 XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_a8 100 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
