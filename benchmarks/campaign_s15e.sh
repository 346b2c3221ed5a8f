# Session 15 (~6 min; run as written, the switch since renamed DGJAX_STABLE_BUFFERS, dgjax/runtime/stable_buffers.py):
# decode results written into donated mailboxes (DGJAX_RESULT_MAILBOX=on) against fresh outputs (off).
# s15d found XLA re-recording qwen3-30b-a3b fp8's whole decode
# graph (792 commands) after every tick, 360-830 µs of host time, "updated_allocs=2": the tick's two result
# buffers. With the mailbox the tick's graph should keep its addresses (no updates between page boundaries);
# interleaved qwen3 pairs with greedy fingerprints (must agree), and XLA's update log (command_buffer_thunk
# VLOG 3) summarized per run: updates of the big graphs, their allocations changed, their host time.
BUDGET_S=${BUDGET_S:-330}
source benchmarks/campaign_lib.sh
export TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=command_buffer_thunk=3
for i in 1 2 3; do
  DGJAX_RESULT_MAILBOX=on run q_on_$i 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_on_$i
  [ $i -lt 3 ] && { DGJAX_RESULT_MAILBOX=off run q_off_$i 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
                    show_tick q_off_$i; }
done
DGJAX_RESULT_MAILBOX=on run llama_on 70 --preset llama-3.1-8b --concurrency 1; show_tick llama_on
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
