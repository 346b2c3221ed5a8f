# Session 18, call 2: the scalar fp8 block scale (DGJAX_FP8_SCALE=auto, default since campaign_s18b) against the
# per-column loads (vector) on glm-4.5-air fp8 C1, and qwen3-30b-a3b fp8 C1 once more with the default (s18b's
# pair both ran in the slow mode); then, with time left, ncu source-level stall sampling of glm's fp8 kernels.
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
run glm_auto 130 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick glm_auto
DGJAX_FP8_SCALE=vector run glm_vec 130 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick glm_vec
unset XLA_PYTHON_CLIENT_MEM_FRACTION
run q_auto2 105 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_auto2
left=$((END - SECONDS)); echo "== $left s left for ncu"
if [ $left -gt 80 ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  DGJAX_DEFAULT_XLA_FLAGS=0 XLA_FLAGS=--xla_gpu_enable_command_buffer= XLA_PYTHON_CLIENT_MEM_FRACTION=0.06 \
    timeout $((left - 30)) $NCU --clock-control none --kernel-name regex:'^(quant_gemv|moe_)' --launch-count 4 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SourceCounters \
    --section SchedulerStats --warp-sampling-interval 0 \
    -o $OUT/src -f python3 -m benchmarks.ncu_probe --calls 0 --no-trace --preset glm > $OUT/ncu.log 2>&1
  echo "== ncu rc $? ($SECONDS s)"; grep -c "Profiling" $OUT/ncu.log
  $NCU --import $OUT/src.ncu-rep --page details --csv > $OUT/details.csv 2> $OUT/import.log
  $NCU --import $OUT/src.ncu-rep --page source --csv --print-source sass > $OUT/source_sass.csv 2>> $OUT/import.log
  (cd $OUT && gzip -f source_sass.csv details.csv && rm -f src.ncu-rep)
fi
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)
