# Session 16's last seconds (~2 min): campaign_s16e.sh's pairs on another machine, off first. In s16e all four
# runs, both switches, lost XLA's early launches; in s16a / s16d every "on" run did and no "off" run.
BUDGET_S=${BUDGET_S:-130}
source benchmarks/campaign_lib.sh
for i in 1 2; do
  DGJAX_STABLE_BUFFERS=off run llama_c4_off_$i 60 --preset llama-3.1-8b --concurrency 4; show_tick llama_c4_off_$i
  run llama_c4_on_$i 60 --preset llama-3.1-8b --concurrency 4; show_tick llama_c4_on_$i
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)
