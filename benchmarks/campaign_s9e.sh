# Session 9 (~9 min): (1) the wide-tile sweep of the fp8 MoE stages again, now that the sweep tells a
# config's stages apart by stage-qualified kernel names (s9d lumped every MoE config into the default);
# (2) the quantized GEMV's new default, 128-column fp8 blocks where the splits still fill the GPU
# (DGJAX_QUANT_GEMV_WIDE=on), against the old 64-column rule, in the engine at one stream.
BUDGET_S=570
source benchmarks/campaign_lib.sh
timeout 170 python3 -m benchmarks.launch_sweep --wide --only moe --budget-s 70 --out $OUT --fmts fp8 \
    --cases "qwen3 experts,glm experts" > $OUT/sweep_moe.log 2>&1
mv $OUT/launch_sweep.md $OUT/launch_sweep_wide_moe.md
echo "== sweep moe ($SECONDS s)"
grep -E "\| (down|gate_up|both) \|" $OUT/launch_sweep_wide_moe.md | grep -v "n/a" | sort -t'|' -k2,2 -k4,4 -k6n \
    | awk -F'|' 'a[$2 $4]++<3 {print $2,$4,$5,$6,$9,$10}'
grep "(default)" $OUT/launch_sweep_wide_moe.md | awk -F'|' '{print "default:",$2,$4,$5,$6,$9}'
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_wide 95 --preset glm-4.5-air --quantize fp8 --concurrency 1
DGJAX_QUANT_GEMV_WIDE=off XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_narrow 95 --preset glm-4.5-air --quantize fp8 --concurrency 1
run qwen3_fp8_wide 75 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_QUANT_GEMV_WIDE=off run qwen3_fp8_narrow 75 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ 2>/dev/null && rm -rf */)
