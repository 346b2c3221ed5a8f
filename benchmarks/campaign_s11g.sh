# Prepared in session 10 for session 11 (~5 min): issue 3's presets at today's defaults. qwen3-8b was last measured
# in session 4 (2026-12-01-qwen3-8b-nvidia-h200-fused-decode.md: C1 226.3 tok/s, 77.8% of the ceiling); llama's
# C4/C16 in session 8 (s8e). 1K context, 1/4/16 streams each, 192-token windows.
BUDGET_S=560
source benchmarks/campaign_lib.sh
run qwen3_8b 200 --preset qwen3-8b --concurrency 1,4,16
run llama 200 --preset llama-3.1-8b --concurrency 1,4,16
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
