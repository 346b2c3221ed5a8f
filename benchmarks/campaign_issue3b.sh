# Session 2 second GPU campaign: fused decode attention kernel check, llama/qwen3 decode with it, MoE baseline.
# bash benchmarks/campaign_issue3b.sh   (on the GPU machine; log in $OUT/campaign.log)
set -x
L=$OUT/campaign.log
python3 -m benchmarks.decode_bench --preset llama-3.1-8b --split-engines --prefill 2048 --out $OUT >> $L 2>&1
python3 -m benchmarks.decode_bench --preset qwen3-8b --split-engines --prefill 2048 --out $OUT >> $L 2>&1
python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 --concurrency 1,4 --prefill 2048 --out $OUT >> $L 2>&1
