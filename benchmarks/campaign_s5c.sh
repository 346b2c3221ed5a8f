# Ran at commit e3aa41e; its probe options (--fmts fp8-probe, DGJAX_FP8_DECODE) were removed after the runs (no gain).
# Session 5, call 3: layout probe - unscaled e4m3 weights stored input-major ([K, N], the bf16 layout) through
# the plain MoE path and the bf16 GEMV kernel, against the checkpoints' [N, K] fp8 path.
python3 -m pip install --no-deps -q llguidance-*.whl
L=$OUT/campaign.log
timeout 540 python3 -m benchmarks.launch_sweep --budget-s 200 --out $OUT --fmts fp8-probe \
    --cases "glm experts,qwen3 experts,glm qkv,qwen3 qkv" > $L 2>&1
echo "rc=$?"; grep -E "Error|error" $L | head -5; grep -E "probe|read ceiling" $OUT/launch_sweep.md | sort -t'|' -k2,2 -k4,4 -k6n | head -60
