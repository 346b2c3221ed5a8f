# Prepared in session 10 for session 11: campaign_s11b.sh (grid-barrier probe, ~3 min) and campaign_s11c.sh
# (glm experts with the down stage split unevenly, ~3 min) in one device call, to pay the machine's start once.
# Read those two scripts for the why.
BUDGET_S=500
source benchmarks/campaign_lib.sh
timeout 200 python3 -m benchmarks.grid_barrier_probe --out $OUT > $OUT/barrier.log 2>&1
echo "== barrier probe rc $? ($SECONDS s)"; tail -8 $OUT/barrier.log
timeout 60 python3 -m benchmarks.grid_barrier_probe --programs 64 --chain 8 > $OUT/barrier64.log 2>&1
echo "== 64 programs ($SECONDS s)"; tail -5 $OUT/barrier64.log
timeout 200 python3 -m benchmarks.launch_sweep --wide --only moe --rows 2 --budget-s 120 --out $OUT --fmts fp8 \
    --cases "glm experts" > $OUT/sweep.log 2>&1
echo "== glm experts sweep ($SECONDS s)"
grep -E "\| (gate_up|down|both) \|" $OUT/launch_sweep.md | grep -v "n/a" | awk -F'|' '{print $2,$4,$5,$6,$9}'
