# Session 16's last call (~8 min): the three open questions its first three calls left.
# 1) llama-3.1-8b C4 / C16 with DGJAX_STABLE_BUFFERS on vs off: s16a read on lower in both (876.6 / 907.3,
#    3152.2 / 3237.6) with the same summed kernel time a tick (4.82 / 4.85, 5.79 / 5.80 ms), only the overlap
#    differing. Two more C4 pairs and one C16 pair, order flipped, say whether that is the switch or the process.
# 2) qwen3-30b-a3b fp8 C1 with its down stage split in two (DGJAX_MOE_DOWN_SPLITS=2): s16b's fast-mode pair read
#    366.2 against 363.0 / 363.2 (down 419 vs 459 µs a tick, its residual add turned into a reduce). Two more pairs.
# 3) qwen3-30b-a3b fp8 with W8A8 dots (DGJAX_FP8_DOT=a8, opt-in for its ~3% output error): s16c's one run fell in
#    the slow mode (347.8 against 331.1 / 330.7 slow defaults); two more runs for a fast-mode reading.
BUDGET_S=${BUDGET_S:-500}
source benchmarks/campaign_lib.sh
for i in 1 2; do
  DGJAX_STABLE_BUFFERS=off run llama_c4_off_$i 70 --preset llama-3.1-8b --concurrency 4; show_tick llama_c4_off_$i
  run llama_c4_on_$i 70 --preset llama-3.1-8b --concurrency 4; show_tick llama_c4_on_$i
done
DGJAX_STABLE_BUFFERS=off run llama_c16_off 70 --preset llama-3.1-8b --concurrency 16; show_tick llama_c16_off
run llama_c16_on 70 --preset llama-3.1-8b --concurrency 16; show_tick llama_c16_on
q() { run $1 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick $1; }
for i in 1 2; do
  DGJAX_MOE_DOWN_SPLITS=2 q q_down2_$i
  q q_$i
  DGJAX_FP8_DOT=a8 q q_a8_$i
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
