# Session 5, call 2: deep K unrolling (4-8 steps per iteration, pipelined or not) for the fp8 kernels, XLA's
# fused-dequant dot, and the bf16 MoE at width 2; timed from the device trace.
python3 -m pip install --no-deps -q llguidance-*.whl
L=$OUT/campaign.log
timeout 540 python3 -m benchmarks.launch_sweep --deep --budget-s 200 --out $OUT \
    --cases "glm experts,qwen3 experts,glm qkv,glm o,qwen3 qkv,qwen3 o" > $L 2>&1
echo "rc=$?"; grep -E "Error|error" $L | head -5; tail -34 $L
