# Prepared in session 20 (~8 min): does the slow mode follow where XLA's temporary buffer lies? s20a/b/c found
# the mode drawn by buffer placement (moving one small parameter array turned slow engines fast; the same moves
# at startup left decode_bench engines slow), never by the kernels. --xla_gpu_temp_buffer_use_separate_color
# gives the temporaries their own allocator (a fixed address every execution). If the mode is the temporaries'
# placement, the flag should make it the same in every process. First mode_probe (3 engines a process; without
# the flag the first engine was slow 11 of 12 times), then qwen3 fp8 C1 through decode_bench, the flag
# interleaved with the default. A changed flag misses the compile cache: the flag's first run compiles (~70 s).
BUDGET_S=${BUDGET_S:-540}
source benchmarks/campaign_lib.sh
SEP="--xla_gpu_temp_buffer_use_separate_color=true"
for i in 1 2; do
  left=$((END - SECONDS)); [ $left -lt 60 ] && { echo "== p$i skipped"; continue; }
  XLA_FLAGS=$SEP timeout $((left < 120 ? left : 120)) python3 -m benchmarks.mode_probe --preset qwen3-30b-a3b \
    --quantize fp8 --engines 3 --rounds 1 --direct 200 --out $OUT/rounds.jsonl > $OUT/p$i.log 2>&1
  echo "== p$i (separate temp color) rc $? ($SECONDS s)"
  grep -E "^round" $OUT/p$i.log | sed -E "s/pid=[0-9]+ //; s/cache=\{[^}]*\} ?//; s/dispatch_host_ms=[^ ]+ //" | cut -c1-200
done
for i in 1 2; do
  XLA_FLAGS=$SEP run q_sep$i 80 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_sep$i
  run q_def$i 60 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_def$i
done
