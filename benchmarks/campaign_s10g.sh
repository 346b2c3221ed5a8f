# Session 10 (~3 min): fp8 expert tiles at 2-4 pipeline stages (launch_sweep --stages), qwen3 and glm experts at
# one stream's 2 rows. Why: Nsight Compute (s10f) showed the default gate/up launch (bn128 s4, 3 stages) at
# 79 KB of shared memory a program, 2 programs an SM, 1.45 waves and 11% achieved occupancy.
source benchmarks/campaign_lib.sh
timeout 200 python3 -m benchmarks.launch_sweep --stages --only moe --rows 2 --budget-s 110 --out $OUT --fmts fp8 \
    --cases "qwen3 experts,glm experts" > $OUT/sweep.log 2>&1
grep -E "\| (gate_up|down|both) \|" $OUT/launch_sweep.md | grep -v "n/a" | awk -F'|' '{print $2,$4,$5,$6,$9}'
