# Session 24 (~4 min): limits_probe again, warmed first and interleaved (s24a measured its first read ceiling on a
# cold clock), with the boundary floor's trace columns and a no-CUDA-graph arm, and the projection ladders at the
# presets' widths (bf16 K = 4096, fp8 K = 2048).
source benchmarks/campaign_lib.sh
timeout 400 python3 -m benchmarks.limits_probe --out $OUT/limits --budget-s 300 > $OUT/limits.log 2>&1
echo "== limits rc $? ($SECONDS s)"; grep -E "^\||^#|^- " $OUT/limits.log | grep -v -- "---"
