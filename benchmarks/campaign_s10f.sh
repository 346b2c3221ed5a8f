# Session 10 (~4 min): the Nsight Compute pass of ncu_probe with an 8 GB jax pool, each kernel once (s10d: the default ~100 GB pool
# was saved and restored on every replay pass; s10e: with the pool off the process crashed at its first compile),
# and no CUDA graphs (the first try of this script: ncu crashed after the first kernel, before the first graph).
# PROBE_ARGS (session 11: --preset glm) goes to ncu_probe.
source benchmarks/campaign_lib.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
DGJAX_DEFAULT_XLA_FLAGS=0 XLA_FLAGS=--xla_gpu_enable_command_buffer= XLA_PYTHON_CLIENT_MEM_FRACTION=0.06 timeout 300 $NCU --clock-control none \
    --kernel-name regex:'^(quant_gemv|moe_|fused_decode|split_merge)' --launch-count 30 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --metrics dram__bytes_read.sum,lts__t_bytes.sum -o $OUT/probe -f \
    python3 -m benchmarks.ncu_probe --calls 0 --no-trace $PROBE_ARGS > $OUT/ncu.log 2>&1
echo "== ncu rc $? ($SECONDS s)"; grep -c "Profiling" $OUT/ncu.log
$NCU --import $OUT/probe.ncu-rep --csv --page raw > $OUT/ncu_raw.csv 2> $OUT/ncu_import.log
python3 -m benchmarks.ncu_probe --ncu-csv $OUT/ncu_raw.csv > $OUT/ncu_table.md 2>&1
cut -c1-200 $OUT/ncu_table.md
rm -f $OUT/probe.ncu-rep
