# Issue 3 GPU campaign (one device call): decode/prefill benches, profile with HLO fusions, fp8 KV.
# bash benchmarks/campaign_issue3.sh   (on the GPU machine; everything lands in $OUT/campaign.log and result files)
set -x
L=$OUT/campaign.log
python3 -m benchmarks.decode_bench --preset llama-3.1-8b --split-engines --reference --out $OUT > $L 2>&1
python3 -m benchmarks.profile_decode --preset llama-3.1-8b --concurrency 1 --ticks 20 --top 26 --hlo-dump --out /tmp/prof >> $L 2>&1
python3 -m benchmarks.decode_bench --preset qwen3-8b --split-engines --out $OUT >> $L 2>&1
python3 -m benchmarks.kernel_check --kv-dtype fp8_e4m3 >> $L 2>&1
python3 -m benchmarks.decode_bench --preset llama-3.1-8b --kv-cache-dtype fp8_e4m3 --prefill 2048 --out $OUT >> $L 2>&1
