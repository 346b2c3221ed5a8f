# Prepared in session 18 (~5 min): Nsight Compute source-level stall sampling of the decode attention and its
# split merge (qwen3-30b-a3b and llama-3.1-8b shapes, 1056 keys), one ncu process per case (ncu_probe --cases:
# the s10f/s18 processes segfaulted after 2-8 kernels), each printed per SASS instruction by benchmarks/ncu_sass.
BUDGET_S=${BUDGET_S:-300}
source benchmarks/campaign_lib.sh
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for case in "qwen3 attention" "llama attention"; do
  tag=${case%% *}
  DGJAX_DEFAULT_XLA_FLAGS=0 XLA_FLAGS=--xla_gpu_enable_command_buffer= XLA_PYTHON_CLIENT_MEM_FRACTION=0.06 timeout 120 \
    $NCU --clock-control none --kernel-name regex:'^(fused_decode|split_merge)' --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SourceCounters \
    --warp-sampling-interval 0 -o $OUT/$tag -f \
    python3 -m benchmarks.ncu_probe --calls 0 --no-trace --cases "$case" > $OUT/ncu_$tag.log 2>&1
  echo "== ncu $case rc $? ($SECONDS s)"
  $NCU --import $OUT/$tag.ncu-rep --page source --csv --print-source sass > $OUT/sass_$tag.csv 2>> $OUT/import.log
  $NCU --import $OUT/$tag.ncu-rep --page details --csv > $OUT/details_$tag.csv 2>> $OUT/import.log
  python3 -m benchmarks.ncu_sass $OUT/sass_$tag.csv --top 12 | cut -c1-160
  (cd $OUT && gzip -f sass_$tag.csv details_$tag.csv && rm -f $tag.ncu-rep)
done
