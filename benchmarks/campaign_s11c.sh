# Prepared in session 10 for session 11 (~3 min): glm-4.5-air's fp8 experts with the down stage split unevenly.
# Its down weight has 11 K steps of 128 (1408 inputs), which no split cut evenly, so the down stage ran unsplit:
# 256 live programs of 11 steps, 21.5 µs a layer for 46 MB (49% of the ceiling; s10a), the largest fp8 stage
# below 60%. The MoE kernel now runs uneven splits (the last split does what is left: 6 + 5, or 3+3+3+2). The
# wide sweep pairs each gate/up launch with a down launch, s1/s2/s4 among them. If a split down wins by more
# than ~0.3 µs a layer (session 9: a split down turned the residual add into a reduce fusion, +13 µs a tick),
# make fp8_wide_config split down where K does not halve.
BUDGET_S=240
source benchmarks/campaign_lib.sh
timeout 200 python3 -m benchmarks.launch_sweep --wide --only moe --rows 2 --budget-s 120 --out $OUT --fmts fp8 \
    --cases "glm experts" > $OUT/sweep.log 2>&1
grep -E "\| (gate_up|down|both) \|" $OUT/launch_sweep.md | grep -v "n/a" | awk -F'|' '{print $2,$4,$5,$6,$9}'
