# Prepared in session 13 for session 14 (~6 min): why identical qwen3-30b-a3b fp8 C1 runs read either ~362 or
# ~330 tok/s. s13 found the per-kernel times equal in both modes (within 1-2%): the difference is all between
# kernels (fast runs: 0.16 ms a tick of overlap, busy 2.81 ms, step 2.76; slow: none, busy 2.93, step 3.00-3.04),
# it is not tied to compiling vs loading from the cache, and early PDL triggers in the Pallas kernels do not
# remove it (s13d: 333.8, 333.7 with them). decode_bench now also prints the launch edges by class
# (xla>xla, xla>pallas, pallas>xla, pallas>pallas: edges, median gap, summed gap per tick), which says whether
# the slow mode adds ~0.3 µs to every edge or to some. Here: the default three times, interleaved with CUDA
# graphs off (XLA_FLAGS=--xla_gpu_enable_command_buffer=: every kernel a stream launch) twice; llama twice.
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
show() { grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'
         grep -h -A8 "Launch edges" $OUT/$1/*.md | grep '^| [a-z]*>' ; }
for i in 1 2 3; do
  run qwen3_$i 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show qwen3_$i
  [ $i -lt 3 ] && { XLA_FLAGS=--xla_gpu_enable_command_buffer= run qwen3_nograph_$i 110 --preset qwen3-30b-a3b \
      --quantize fp8 --concurrency 1; show qwen3_nograph_$i; }
done
for i in 1 2; do  # llama-3.1-8b C1 shows the same two modes (241.1-241.5 tok/s with +0.11-0.13 ms overlap, 228-231 without)
  run llama_$i 80 --preset llama-3.1-8b --concurrency 1; show llama_$i
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
