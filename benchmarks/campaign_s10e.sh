# Session 10 (~8 min): s10d's Nsight Compute pass again, with jax's memory pool off (s10d's ncu saved and
# restored ~100 GB of preallocated device memory per replay pass and profiled two kernels in 170 s), then the
# engine on this session's final defaults: qwen3-30b-a3b fp8 C1 and bf16 C1/C4.
BUDGET_S=470
B="--contexts 1024 --prefill 2048 --decode-tokens 192 --trace-tokens 8"
source benchmarks/campaign_lib.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 200 $NCU --clock-control none \
    --kernel-name regex:'^(quant_gemv|moe_|fused_decode|split_merge)' --launch-count 30 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis --metrics dram__bytes_read.sum,lts__t_bytes.sum -o $OUT/probe -f \
    python3 -m benchmarks.ncu_probe --calls 1 --no-trace > $OUT/ncu.log 2>&1
echo "== ncu rc $? ($SECONDS s)"; grep -c "Profiling" $OUT/ncu.log; sleep 5
$NCU --import $OUT/probe.ncu-rep --csv --page raw > $OUT/ncu_raw.csv 2> $OUT/ncu_import.log
python3 -m benchmarks.ncu_probe --ncu-csv $OUT/ncu_raw.csv > $OUT/ncu_table.md 2>&1
cut -c1-200 $OUT/ncu_table.md
rm -f $OUT/probe.ncu-rep
run qwen3_fp8 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
run qwen3_bf16 120 --preset qwen3-30b-a3b --concurrency 1,4
(cd $OUT && tar czf /tmp/runs.tgz . && find . -mindepth 1 ! -name ncu_table.md -delete 2>/dev/null; rm -rf ./*/; mv /tmp/runs.tgz .)  # a call returns few files
