# Next GPU campaign (prepared 2026-12-01): validate the kernels that have only run in interpret mode and
# the Triton-lowering checks, then the MoE engine numbers. One device call; log in $OUT/campaign.log.
# Carry the llguidance wheel (device has no network): run(carry=[llguidance-*.whl]) and
#   python3 -m pip install --no-deps llguidance-*.whl
set -x
L=$OUT/campaign.log
timeout 150 python3 -m benchmarks.quant_gemv_check --budget-s 120 > $L 2>&1
timeout 150 python3 -m benchmarks.moe_prefill_check >> $L 2>&1
timeout 100 python3 -m benchmarks.moe_kernel_check --preset qwen3-30b-a3b --tokens 1 --sweep >> $L 2>&1
DGJAX_MOE_PREFILL=kernel timeout 120 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 \
    --concurrency 1,4 --prefill 2048 --decode-tokens 64 --out $OUT >> $L 2>&1
timeout 60 python3 -m benchmarks.profile_decode --preset qwen3-30b-a3b --concurrency 1 --ticks 10 --top 30 \
    --hlo-dump --out /tmp/prof >> $L 2>&1
timeout 150 python3 -m benchmarks.decode_bench --preset glm-4.5-air --quantize fp8 --contexts 1024 --concurrency 1,4 \
    --prefill 2048 --decode-tokens 64 --out $OUT >> $L 2>&1
timeout 120 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 --contexts 1024 --concurrency 1 \
    --prefill 2048 --decode-tokens 64 --out $OUT >> $L 2>&1
