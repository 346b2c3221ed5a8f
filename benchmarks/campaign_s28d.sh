# Session 28: s28c's Nsight Compute pass crashed (segfault) after its first case; here one ncu process a case.
source benchmarks/campaign_lib.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
i=0
for case in "llama attention 8288" "llama attention 32800" "qwen3 attention 8288"; do
  i=$((i + 1))
  DGJAX_DEFAULT_XLA_FLAGS=0 XLA_FLAGS=--xla_gpu_enable_command_buffer= XLA_PYTHON_CLIENT_MEM_FRACTION=0.06 timeout 150 \
    $NCU --clock-control none --kernel-name regex:'^(fused_decode|split_merge)' --launch-count 4 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis --metrics dram__bytes_read.sum,lts__t_bytes.sum -o $OUT/probe$i -f \
    python3 -m benchmarks.ncu_probe --preset long --calls 0 --no-trace --cases "$case" > $OUT/ncu$i.log 2>&1
  echo "== $case: ncu rc $? ($SECONDS s)"
  $NCU --import $OUT/probe$i.ncu-rep --csv --page raw > $OUT/ncu_raw$i.csv 2>> $OUT/ncu_import.log
  python3 -m benchmarks.ncu_probe --ncu-csv $OUT/ncu_raw$i.csv > $OUT/ncu_table$i.md 2>&1
  tail -n +3 $OUT/ncu_table$i.md | cut -c1-300
  $NCU --import $OUT/probe$i.ncu-rep --page details > $OUT/ncu_details$i.txt 2>&1
  rm -f $OUT/probe$i.ncu-rep
done
cd $OUT && tar czf runs.tgz *.log *.md *.txt 2>/dev/null; rm -rf */ *.log *.csv *.txt ncu_table*.md
