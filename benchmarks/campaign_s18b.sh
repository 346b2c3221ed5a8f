# Session 18, call 1 (campaign_s18a did not start: no machine). fp8 block scales as one scalar per tile
# (DGJAX_FP8_SCALE=auto, new default) against one per column (vector, the old loads), and a probe of what the
# per-step x row scaling costs (DGJAX_FP8_X=unscaled: x converted to f16 as is; fine for these random weights):
# the fp8 launch sweeps (qwen3 shapes, default launches first) and qwen3-30b-a3b fp8 C1 through the engine, each
# three ways; then, with time left, campaign_s18a's ncu source-level stall sampling of the new default.
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
CASES="qwen3 experts,qwen3 qkv,qwen3 o"
sweep() {
  local name=$1; shift
  env "$@" timeout 90 python3 -m benchmarks.launch_sweep --budget-s 20 --fmts fp8 --wide --cases "$CASES" \
    --out $OUT/sweep_$name > $OUT/sweep_$name.log 2>&1
  echo "== sweep $name ($SECONDS s)"; sed -n '/best per case/,$p' $OUT/sweep_$name.log | grep default | cut -c1-150
}
sweep auto DGJAX_FP8_SCALE=auto
sweep unscaled DGJAX_FP8_X=unscaled
sweep vector DGJAX_FP8_SCALE=vector
run q_auto 105 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_auto
DGJAX_FP8_X=unscaled run q_unscaled 105 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_unscaled
DGJAX_FP8_SCALE=vector run q_vec 105 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_vec
left=$((END - SECONDS)); echo "== $left s left for ncu"
if [ $left -gt 70 ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  DGJAX_DEFAULT_XLA_FLAGS=0 XLA_FLAGS=--xla_gpu_enable_command_buffer= XLA_PYTHON_CLIENT_MEM_FRACTION=0.06 \
    timeout $((left - 25)) $NCU --clock-control none --kernel-name regex:'^(quant_gemv|moe_)' --launch-count 4 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SourceCounters \
    --section SchedulerStats --warp-sampling-interval 0 \
    -o $OUT/src -f python3 -m benchmarks.ncu_probe --calls 0 --no-trace > $OUT/ncu.log 2>&1
  echo "== ncu rc $? ($SECONDS s)"; grep -c "Profiling" $OUT/ncu.log
  $NCU --import $OUT/src.ncu-rep --page details --csv > $OUT/details.csv 2> $OUT/import.log
  $NCU --import $OUT/src.ncu-rep --page source --csv --print-source sass > $OUT/source_sass.csv 2>> $OUT/import.log
  (cd $OUT && gzip -f source_sass.csv details.csv && rm -f src.ncu-rep)
fi
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)
