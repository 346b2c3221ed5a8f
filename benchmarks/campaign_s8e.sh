# Session 8, call 3 (~9 min), after s8d. The new defaults, with no switches set:
# - DGJAX_QUANT_GEMV_FUSE=splits (s8d: qwen3 fp8 C1 355.2 tok/s against 316.9 with none and 256-285 with all);
# - DGJAX_MOE_FUSE=none, DGJAX_ADD_NORM auto = ref, the XLA routing with the logits padding rule.
# Presets: qwen3-30b-a3b fp8 C1/4, qwen3-30b-a3b bf16 C1/4, llama-3.1-8b C1/4/16 (s7c: 229.7 / 913.8 /
# 3232.4), and glm-4.5-air fp8 C1 with and without DGJAX_ROUTING_PAD=ids. glm's s8d run gave 143.6 tok/s on
# 6.70 ms of device time, where s7c gave 150.3 on 6.75 ms.
BUDGET_S=560
source benchmarks/campaign_lib.sh
run qwen3_fp8 120 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1,4
run qwen3_bf16 120 --preset qwen3-30b-a3b --concurrency 1,4
run llama 120 --preset llama-3.1-8b --concurrency 1,4,16
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm 120 --preset glm-4.5-air --quantize fp8 --concurrency 1
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 DGJAX_ROUTING_PAD=ids run glm_padids 100 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
