# Session 12 (~3 min, the last device minutes): llama-3.1-8b through the engine with the attention rule of
# s12f/s12g (3 splits of 128-key steps at 16 rows on the 1K engine's 2K table: 22.6 µs a layer against
# 25.3 for s11's 6 x 128): C16 at 1K (issue 3: 3200 tok/s; 3177.4 in s11h), then C4 at 8K (9 x 128).
BUDGET_S=${BUDGET_S:-230}
source benchmarks/campaign_lib.sh
run llama_c16 100 --preset llama-3.1-8b --concurrency 16
B="--contexts 8192 --prefill 2048 --decode-tokens 192 --trace-tokens 8" run llama_c4_8k 100 --preset llama-3.1-8b --concurrency 4
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
