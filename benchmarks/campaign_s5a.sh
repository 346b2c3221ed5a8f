# Session 5, call 1: launch sweep of the fp8/bf16 skinny kernels (tensor-core vs CUDA-core, unrolled K loops)
# at the width-2 decode shapes of qwen3-30b-a3b and glm-4.5-air, timed from the device trace.
python3 -m pip install --no-deps -q llguidance-*.whl
L=$OUT/campaign.log
timeout 540 python3 -m benchmarks.launch_sweep --budget-s 220 --out $OUT > $L 2>&1
echo "rc=$?"; grep -E "Error|error" $L | head -5; tail -40 $L
