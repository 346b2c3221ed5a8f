# Prepared in session 10 for session 11: campaign_s11b.sh (grid-barrier probe, ~3 min) and campaign_s11c.sh
# (glm experts with the down stage split unevenly, ~3 min) in one device call, to pay the machine's start once.
# Read those two scripts for the why. Then glm-4.5-air C1 with the one-kernel expert selection
# (DGJAX_MOE_ROUTING=kernel) against XLA's: glm's sigmoid routing is 5 XLA launches a layer after the router dot
# (deviceless, session 10: or, two reductions, select, normalize), where qwen3's softmax routing is 3 (the kernel
# matched those in device time in session 8, s8d, and was left opt-in).
BUDGET_S=560
source benchmarks/campaign_lib.sh
timeout 200 python3 -m benchmarks.grid_barrier_probe --out $OUT > $OUT/barrier.log 2>&1
echo "== barrier probe rc $? ($SECONDS s)"; tail -8 $OUT/barrier.log
timeout 60 python3 -m benchmarks.grid_barrier_probe --programs 64 --chain 8 > $OUT/barrier64.log 2>&1
echo "== 64 programs ($SECONDS s)"; tail -5 $OUT/barrier64.log
timeout 200 python3 -m benchmarks.launch_sweep --wide --only moe --rows 2 --budget-s 120 --out $OUT --fmts fp8 \
    --cases "glm experts" > $OUT/sweep.log 2>&1
echo "== glm experts sweep ($SECONDS s)"
grep -E "\| (gate_up|down|both) \|" $OUT/launch_sweep.md | grep -v "n/a" | awk -F'|' '{print $2,$4,$5,$6,$9}'
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm 120 --preset glm-4.5-air --quantize fp8 --concurrency 1
DGJAX_MOE_ROUTING=kernel XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_routing_kernel 120 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ 2>/dev/null && rm -rf */)
