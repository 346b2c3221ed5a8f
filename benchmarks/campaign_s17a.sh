# Session 17, call 1: does an L2-warm weight make decode's readers faster, and does an L2 prefetch kernel beside
# latency-bound kernels get the weight there (benchmarks/l2_probe.py)?
set -u
timeout 480 python3 -m benchmarks.l2_probe --out $OUT > $OUT/l2_probe.log 2>&1
echo "rc=$?"
grep -v "^{" $OUT/l2_probe.log | tail -45
