# Session 20 (~5 min): is the slow mode drawn again whenever XLA updates the decode tick's CUDA graph?
# s19f: the graph check's instance #1 timed fast then ran slow in its engine (p1), and timed slow then ran fast
# (p2, p3), so the mode is not a property of a loaded executable. Here each single-engine process, after its C1
# round, moves one small parameter array 12 times (each move changes an argument address, so XLA updates the
# tick's graph) and times 200 direct ticks after each: flips between ~2.65 and ~2.95 ms mean a draw per update.
BUDGET_S=${BUDGET_S:-300}
source benchmarks/campaign_lib.sh
for i in 1 2 3; do
  left=$((END - SECONDS)); [ $left -lt 40 ] && { echo "== p$i skipped"; continue; }
  timeout $((left < 90 ? left : 90)) python3 -m benchmarks.mode_probe --preset qwen3-30b-a3b --quantize fp8 \
    --engines 1 --rounds 1 --direct 200 --redraws 12 --out $OUT/rounds.jsonl > $OUT/p$i.log 2>&1
  echo "== p$i rc $? ($SECONDS s)"
  grep -E "^round" $OUT/p$i.log | sed -E "s/pid=[0-9]+ //; s/cache=\{[^}]*\} ?//" | cut -c1-400
done
