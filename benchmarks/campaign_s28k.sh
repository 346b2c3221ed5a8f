# Session 28: what a grid-wide semaphore barrier costs inside one Mosaic-GPU kernel (132 blocks, 64 rounds) against
# 64 chained one-block-an-SM launches in one CUDA graph (benchmarks/mgpu_barrier_probe.py).
source benchmarks/campaign_lib.sh
timeout 150 python3 -m benchmarks.mgpu_barrier_probe --out $OUT > $OUT/probe.log 2>&1
echo "== probe rc $? ($SECONDS s)"; grep -E "^\||blocks|Error|error" $OUT/probe.log | head -12
timeout 100 python3 -m benchmarks.mgpu_barrier_probe --blocks 66 > $OUT/probe66.log 2>&1
echo "== probe66 rc $? ($SECONDS s)"; grep -E "^\||blocks|Error|error" $OUT/probe66.log | head -8
tail -5 $OUT/probe.log | cut -c1-300
cd $OUT && tar czf runs.tgz *.log *.md 2>/dev/null; rm -rf */ *.log
