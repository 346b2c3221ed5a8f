# Prepared in session 10 for session 11 (~3 min): does a grid-wide barrier inside one kernel cost less than a
# launch boundary? benchmarks/grid_barrier_probe.py chains 16 pairs of bf16 GEMVs (2048 -> 4096 -> 2048, 2 rows,
# distinct weights) as two launches a pair, as one launch a pair around an atomic-counter grid barrier (128
# programs, all resident), and as XLA dots; wall clock in one executable (one CUDA graph) and device trace.
# If `fused` beats `split` by more than the barrier's spin, a decode layer in fewer, longer kernels is worth
# building (session 10's counters: every decode kernel is latency-bound at 6-15% occupancy). The probe reports
# whether any program hit its spin limit (a grid that was not all resident): then its numbers are void.
BUDGET_S=240
source benchmarks/campaign_lib.sh
timeout 200 python3 -m benchmarks.grid_barrier_probe --out $OUT > $OUT/barrier.log 2>&1
echo "== barrier probe rc $? ($SECONDS s)"; tail -8 $OUT/barrier.log
timeout 60 python3 -m benchmarks.grid_barrier_probe --programs 64 --chain 8 > $OUT/barrier64.log 2>&1
echo "== 64 programs ($SECONDS s)"; tail -5 $OUT/barrier64.log
