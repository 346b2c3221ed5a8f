# Prepared in session 8 for session 9 (~8 min): the split merge kernel above 2 rows. Since session 4 it runs
# only at batch <= 2, chosen from an untraced comparison across days. Above that, XLA merges in three launches
# per layer. Session 8 saw one launch fewer per layer shorten the tick by more than the device time it saved.
# A/B with DGJAX_SPLIT_MERGE_ROWS=16 at 4 and 16 streams.
BUDGET_S=540
source benchmarks/campaign_lib.sh
run llama 120 --preset llama-3.1-8b --concurrency 4,16
DGJAX_SPLIT_MERGE_ROWS=16 run llama_merge16 110 --preset llama-3.1-8b --concurrency 4,16
run qwen3_fp8 90 --preset qwen3-30b-a3b --quantize fp8 --concurrency 4
DGJAX_SPLIT_MERGE_ROWS=16 run qwen3_fp8_merge16 90 --preset qwen3-30b-a3b --quantize fp8 --concurrency 4
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
