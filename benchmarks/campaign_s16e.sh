# Session 16's fifth call (~4 min, what was left): llama-3.1-8b C4 with the stable-buffer mailbox holding only
# the result's non-empty arrays (the tick no longer copies two [4, 0] constants into donated outputs: 440
# graph commands, as with fresh buffers) against DGJAX_STABLE_BUFFERS=off. s16a / s16d: with the empty arrays
# donated, all four "on" runs lost XLA's early launches between kernels (edges +0.16 µs against -0.22) and read
# 876.6-884.0 tok/s against 907.3-914.4 off.
BUDGET_S=${BUDGET_S:-190}
source benchmarks/campaign_lib.sh
for i in 1 2; do
  run llama_c4_on_$i 70 --preset llama-3.1-8b --concurrency 4; show_tick llama_c4_on_$i
  DGJAX_STABLE_BUFFERS=off run llama_c4_off_$i 70 --preset llama-3.1-8b --concurrency 4; show_tick llama_c4_off_$i
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)
