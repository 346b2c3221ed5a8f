# Prepared in session 12 for session 13 (~6 min): why identical qwen3-30b-a3b fp8 C1 runs read either ~364 or
# ~330 tok/s. In every fast run so far (s6e-s7e, s11i, s12e, s12f's first) the kernels' summed time exceeded
# the traced busy time by 0.11-0.15 ms a tick: kernels overlapped, as when programmatic dependent launch lets
# one start before its predecessor ends; in every slow one (s11e x4, s12e a8, s12f's last three) by ~-0.01.
# Same executables (cache hits) have landed on both sides. Here: the default three times, interleaved with
# CUDA graphs off (XLA_FLAGS=--xla_gpu_enable_command_buffer=, every kernel a stream launch with its PDL
# attribute) twice; decode_bench now prints "ms of kernel time: +X ms overlapped" beside busy time, and
# which kernel pairs overlap, on the same stream (a PDL launch waiting) or on another (concurrent work).
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
show() { grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'
         grep -h -A9 "Overlapping kernels" $OUT/$1/*.md | grep '^| `' | head -4; }
for i in 1 2 3; do
  run qwen3_$i 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show qwen3_$i
  [ $i -lt 3 ] && { XLA_FLAGS=--xla_gpu_enable_command_buffer= run qwen3_nograph_$i 110 --preset qwen3-30b-a3b \
      --quantize fp8 --concurrency 1; show qwen3_nograph_$i; }
done
for i in 1 2; do  # llama-3.1-8b C1 shows the same two modes (241.1-241.5 tok/s with +0.11-0.13 ms overlap, 228-231 without)
  run llama_$i 80 --preset llama-3.1-8b --concurrency 1; show llama_$i
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
