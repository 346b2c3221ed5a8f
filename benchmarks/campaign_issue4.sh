# Issue 4 GPU campaign (short): MoE decode kernel vs ragged_dot/gather, then qwen3-30b-a3b through the engine.
# bash benchmarks/campaign_issue4.sh   (on the GPU machine; log in $OUT/campaign.log)
set -x
L=$OUT/campaign.log
timeout 170 python3 -m benchmarks.moe_kernel_check > $L 2>&1
timeout 110 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 --concurrency 1,4 --prefill 2048 --decode-tokens 64 --out $OUT >> $L 2>&1
