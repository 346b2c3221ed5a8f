# Session 28: why the decode attention reads ~2 TB/s at 8K keys in the one-stream bucket (3.1 at 32K, 4.0 at 16
# rows x 8K; s28a/b): trace-timed cases, then Nsight Compute (DRAM throughput, occupancy, stall reasons) on the
# fused attention and its split merge at 1K / 8K / 32K keys (ncu_probe --preset long; setup as campaign_s10f.sh).
source benchmarks/campaign_lib.sh
timeout 120 python3 -m benchmarks.ncu_probe --preset long --out $OUT/trace > $OUT/trace.log 2>&1
echo "== trace ($SECONDS s)"; grep -E "^\||Error" $OUT/trace.log | head -20
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
DGJAX_DEFAULT_XLA_FLAGS=0 XLA_FLAGS=--xla_gpu_enable_command_buffer= XLA_PYTHON_CLIENT_MEM_FRACTION=0.06 timeout 300 $NCU --clock-control none \
    --kernel-name regex:'^(fused_decode|split_merge)' --launch-count 30 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --metrics dram__bytes_read.sum,lts__t_bytes.sum -o $OUT/probe -f \
    python3 -m benchmarks.ncu_probe --preset long --calls 0 --no-trace > $OUT/ncu.log 2>&1
echo "== ncu rc $? ($SECONDS s)"; grep -c "Profiling" $OUT/ncu.log
$NCU --import $OUT/probe.ncu-rep --csv --page raw > $OUT/ncu_raw.csv 2> $OUT/ncu_import.log
python3 -m benchmarks.ncu_probe --ncu-csv $OUT/ncu_raw.csv > $OUT/ncu_table.md 2>&1
cut -c1-260 $OUT/ncu_table.md
rm -f $OUT/probe.ncu-rep
cd $OUT && tar czf runs.tgz *.log *.md trace 2>/dev/null; rm -rf */ *.log ncu_raw.csv
