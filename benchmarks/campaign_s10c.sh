# Prepared in session 9 for session 10 (~9 min): the one-kernel MoE decode path (DGJAX_MOE_FUSE=expert,
# dgjax/pallas/moe_decode/fused.py: two launches a layer instead of four, h kept in registers, fewer and
# longer programs) against the two-stage kernel. First its own trace-timed sweep at one stream's width
# (2 rows, fp8 and bf16, 32-128 ffw columns a program, 4-8 warps), then the engine at one stream, each
# preset with and without it in the same call (session 10: glm's baseline run added, qwen3 bf16 dropped).
BUDGET_S=560
source benchmarks/campaign_lib.sh
timeout 200 python3 -m benchmarks.moe_fused_sweep --rows 2 --budget-s 150 --out $OUT > $OUT/fused_sweep.log 2>&1
echo "== fused sweep ($SECONDS s)"; grep -E "^\| " $OUT/moe_fused_sweep.md | grep -v "n/a\|---\|case" | awk -F'|' '{print $2,$3,$5,$6,$9,$10}'
run qwen3_fp8 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_MOE_FUSE=expert run qwen3_fp8_fused 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_MOE_FUSE=expert XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_fused 110 --preset glm-4.5-air --quantize fp8 --concurrency 1
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm 110 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ 2>/dev/null && rm -rf */)
