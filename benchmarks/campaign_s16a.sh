# Prepared in session 15 for session 16 (~8 min): DGJAX_STABLE_BUFFERS as committed (results in donated mailboxes,
# the batch layout rewritten in place, the split tick's logits donated) against off (fresh buffers). s15e timed
# the results part alone: the decode graph's re-records fell from 202 to 12 a run (the 12: layout re-sent at page
# boundaries, which the in-place layout now removes) and three qwen3 fp8 C1 runs all read the fast mode
# (358.0-362.0). Here: qwen3 fp8 C1 interleaved (is the slow mode gone?), and llama C4 / C16, where rows cross
# pages every few ticks (C16: nearly every tick re-recorded the graph before), with XLA's update log summarized.
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
export TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=command_buffer_thunk=3
for i in 1 2 3; do
  run q_on_$i 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_on_$i
  [ $i -lt 3 ] && { DGJAX_STABLE_BUFFERS=off run q_off_$i 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
                    show_tick q_off_$i; }
done
for c in 4 16; do
  run llama_c${c}_on 80 --preset llama-3.1-8b --concurrency $c; show_tick llama_c${c}_on
  DGJAX_STABLE_BUFFERS=off run llama_c${c}_off 80 --preset llama-3.1-8b --concurrency $c; show_tick llama_c${c}_off
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
