# Session 18, call 1 (~5 min): Nsight Compute source-level (SASS) stall sampling of qwen3's fp8 decode kernels
# (q/k/v and o GEMVs, MoE gate/up and down) at the engine's default launches, to see which instructions the
# warps wait on (s10f had only the aggregate stall reasons). Same ncu setup as campaign_s10f.sh.
source benchmarks/campaign_lib.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
DGJAX_DEFAULT_XLA_FLAGS=0 XLA_FLAGS=--xla_gpu_enable_command_buffer= XLA_PYTHON_CLIENT_MEM_FRACTION=0.06 timeout 300 $NCU \
    --clock-control none --kernel-name regex:'^(quant_gemv|moe_)' --launch-count 4 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SourceCounters \
    --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats --warp-sampling-interval 0 \
    -o $OUT/src -f python3 -m benchmarks.ncu_probe --calls 0 --no-trace > $OUT/ncu.log 2>&1
echo "== ncu rc $? ($SECONDS s)"; grep -c "Profiling" $OUT/ncu.log; tail -3 $OUT/ncu.log
$NCU --import $OUT/src.ncu-rep --page details --csv > $OUT/details.csv 2> $OUT/import.log
$NCU --import $OUT/src.ncu-rep --page source --csv --print-source sass > $OUT/source_sass.csv 2>> $OUT/import.log
$NCU --import $OUT/src.ncu-rep --page raw --csv > $OUT/raw.csv 2>> $OUT/import.log
python3 -m benchmarks.ncu_probe --ncu-csv $OUT/raw.csv > $OUT/ncu_table.md 2>&1; cut -c1-250 $OUT/ncu_table.md
ls -la $OUT; head -c 600 $OUT/source_sass.csv
(cd $OUT && gzip -f source_sass.csv details.csv raw.csv && rm -f src.ncu-rep)
