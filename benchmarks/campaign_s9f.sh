# Session 9 (~7 min): the engine with both wide fp8 defaults (quantized GEMV 128-column blocks, s9d/s9e;
# MoE experts at 1-2 tokens 128-column blocks split to one program per SM, s9e's sweep) against both off.
BUDGET_S=480
source benchmarks/campaign_lib.sh
run qwen3_fp8_wide 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_QUANT_GEMV_WIDE=off DGJAX_MOE_FP8_WIDE=off run qwen3_fp8_off 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_wide 120 --preset glm-4.5-air --quantize fp8 --concurrency 1
DGJAX_QUANT_GEMV_WIDE=off DGJAX_MOE_FP8_WIDE=off XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_off 110 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ 2>/dev/null && rm -rf */)
