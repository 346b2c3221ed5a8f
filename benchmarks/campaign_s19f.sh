# Prepared in session 19 (~3 min): the decode graph check (dgjax/runtime/graph_check.py, DGJAX_GRAPH_CHECK=auto)
# against the slow first engine of a process: three processes of one engine each (s19d/s19e: such an engine was
# slow 8 of 8 times), then one with the check off as the control; each prints what the check timed per decode
# executable (reloads included), then its C1 round and direct ticks.
BUDGET_S=${BUDGET_S:-240}
source benchmarks/campaign_lib.sh
for i in 1 2 3 off; do
  left=$((END - SECONDS)); [ $left -lt 40 ] && { echo "== p$i skipped"; continue; }
  mode=auto; [ $i = off ] && mode=off
  DGJAX_GRAPH_CHECK=$mode timeout $((left < 80 ? left : 80)) python3 -m benchmarks.mode_probe --preset qwen3-30b-a3b --quantize fp8 \
    --engines 1 --rounds 1 --direct 200 --out $OUT/rounds.jsonl > $OUT/p$i.log 2>&1
  echo "== p$i rc $? ($SECONDS s)"
  grep -E "^round|graph check" $OUT/p$i.log | sed -E "s/pid=[0-9]+ //; s/cache=\{[^}]*\} ?//" | cut -c1-300
done
