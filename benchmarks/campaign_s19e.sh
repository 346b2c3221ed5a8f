# Session 19 (~8 min): s19d found the slow mode per engine (the first engine of every process slow, later ones
# mixed), with the traced ticks early-launched either way. Is it the device or the engine's host loop? Each
# engine's round is followed by its decode executable run straight from Python (mode_probe --direct), and the
# rounds report the host's wait and dispatch times. One process as s19d, one with 8 GB allocated and freed
# before the first engine (as decode_bench's ceiling measurement does); then the balanced-split launch sweep.
# Direct runs come with and without the per-tick device-to-host result copies (PJRT ends each with a host
# callback on its transfer stream; a graph whose kernels share a hardware queue with it would stall on it).
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
probe() {
  local name=$1; shift
  local left=$((END - SECONDS)); [ $left -lt 60 ] && { echo "== $name skipped"; return; }
  timeout $((left < 130 ? left : 130)) python3 -m benchmarks.mode_probe --preset qwen3-30b-a3b --quantize fp8 \
    --engines 3 --rounds 1 --direct 200 "$@" --out $OUT/rounds.jsonl > $OUT/$name.log 2>&1
  echo "== $name rc $? ($SECONDS s)"
  grep -E "^round" $OUT/$name.log | sed -E "s/pid=[0-9]+ //; s/cache=\{[^}]*\} ?//" | cut -c1-200
}
probe default
probe prealloc --prealloc-gb 8
left=$((END - SECONDS))
if [ $left -gt 150 ]; then
  timeout $((left - 20)) python3 -m benchmarks.launch_sweep --budget-s 60 --fmts fp8 --balanced \
    --cases "qwen3 experts,qwen3 qkv,qwen3 o" --out $OUT/sweep_balanced > $OUT/sweep_balanced.log 2>&1
  echo "== balanced sweep ($SECONDS s)"; sed -n '/best per case/,$p' $OUT/sweep_balanced.log | cut -c1-150
fi
