# Prepared in session 14 for session 15 (~6 min): is qwen3-30b-a3b fp8's slow mode (about half the processes run
# ~8% slower with no kernel overlap anywhere: s13, s14c/d/e) tied to XLA updating the decode step's CUDA graph
# between ticks? XLA rewrites a graph's kernel nodes whenever a buffer it captured moved (update mode
# ALWAYS_UPDATE, the default); NEVER_UPDATE keeps the graph as captured, with the stable addresses XLA then
# arranges for (CAPTURE_CMD_NEVER_UPDATE: only traced commands updated). A run whose greedy fingerprint differs
# from the default's computed something else, which rules the mode out whatever its speed. Each mode is first
# checked against this jax's XLA (an unknown value fails the compile, not the run).
BUDGET_S=${BUDGET_S:-500}
source benchmarks/campaign_lib.sh
show() { grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'; grep -h "^Greedy tokens" $OUT/$1/*.md
         grep -h -A8 "Launch edges" $OUT/$1/*.md | grep '^| [a-z]*>' ; }
MODES=""
for m in NEVER_UPDATE CAPTURE_CMD_NEVER_UPDATE SKIP_TEMP; do
  python3 -c "import jax; jax.jit(lambda x: x * 2).lower(1.).compile(
      compiler_options={'xla_gpu_command_buffer_update_mode': '$m'})" > /dev/null 2>&1 && MODES="$MODES $m"
done
MODES=${MODES# }
echo "== update modes this XLA knows besides the default: $MODES"
for i in 1 2 3; do
  run q_$i 90 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show q_$i
  for m in $MODES; do
    [ $i -gt 2 ] && [ $m != ${MODES%% *} ] && continue  # the third round: the first mode only
    XLA_FLAGS=--xla_gpu_command_buffer_update_mode=$m run q_${m}_$i 70 --preset qwen3-30b-a3b --quantize fp8 \
        --concurrency 1; show q_${m}_$i
  done
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
