# Prepared in session 12 for session 13 (~5 min): the C16 attention launch in the engine, in one call. The
# s12g sweep (16 rows, the 1K engine's 2K table) had 3 splits of 128-key steps (the new default) at 22.5-22.8 µs
# a layer against 25.3 for s11's 6 x 128, but s12h's engine trace timed the new launch at 24.4 µs a layer and
# s11h's (another call, another H200) the old one at 21.0. Here llama-3.1-8b C16 1K, the default (3 x 128)
# against DGJAX_ATTENTION_PROGRAMS=528 (5 x 128: the nearest the switch gets to s11's 6 x 128, which 6 splits
# of this table would step 64 keys), interleaved twice; tok/s decides.
BUDGET_S=${BUDGET_S:-420}
source benchmarks/campaign_lib.sh
for i in 1 2; do
  run llama_c16_$i 90 --preset llama-3.1-8b --concurrency 16
  DGJAX_ATTENTION_PROGRAMS=528 run llama_c16_p528_$i 90 --preset llama-3.1-8b --concurrency 16
done
grep -h "fused_decode_attention" $OUT/llama_c16_1/*.md $OUT/llama_c16_p528_1/*.md | head -4
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
