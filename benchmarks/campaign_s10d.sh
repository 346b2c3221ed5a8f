# Session 10 (~9 min): why the decode kernels run at 30-50% of the ceiling, from hardware counters, and the
# attention's idle splits. 1) benchmarks/ncu_probe.py trace-timed: qwen3 fp8 q/k/v and o GEMVs, experts,
# the fused decode attention (qwen3 with 16 split partials in, llama with bf16 rows) with and without
# skip_idle, XLA's bf16 dot at llama's o shape. 2) The same kernels under Nsight Compute (never used here
# before; the device notes say it reads counters on this Firecracker machine with --clock-control none):
# DRAM bytes and throughput, occupancy, registers, warp stall reasons. 3) The engine with skip_idle on/off:
# qwen3 fp8 and llama C1, interleaved.
BUDGET_S=560
B="--contexts 1024 --prefill 2048 --decode-tokens 192 --trace-tokens 8"
source benchmarks/campaign_lib.sh
timeout 150 python3 -m benchmarks.ncu_probe --out $OUT > $OUT/probe.log 2>&1
echo "== probe ($SECONDS s)"; grep -E "^\| " $OUT/probe.log | cut -c1-260
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
timeout 170 $NCU --clock-control none --kernel-name regex:'^(quant_gemv|moe_|fused_decode|split_merge)' \
    --launch-count 40 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis --metrics dram__bytes_read.sum,lts__t_bytes.sum -o $OUT/probe -f \
    python3 -m benchmarks.ncu_probe --calls 2 --no-trace > $OUT/ncu.log 2>&1
echo "== ncu rc $? ($SECONDS s)"; tail -3 $OUT/ncu.log
$NCU --import $OUT/probe.ncu-rep --csv --page raw > $OUT/ncu_raw.csv 2> $OUT/ncu_import.log
python3 -m benchmarks.ncu_probe --ncu-csv $OUT/ncu_raw.csv > $OUT/ncu_table.md 2>&1
cut -c1-230 $OUT/ncu_table.md
run qwen3_skip 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_ATTENTION_SKIP_IDLE=off run qwen3_noskip 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
run llama_skip 100 --preset llama-3.1-8b --concurrency 1
DGJAX_ATTENTION_SKIP_IDLE=off run llama_noskip 100 --preset llama-3.1-8b --concurrency 1
(cd $OUT && tar czf runs.tgz */ 2>/dev/null && rm -rf */)
