# Prepared in session 19 (~8 min): the decode graph check (dgjax/runtime/graph_check.py, DGJAX_GRAPH_CHECK=auto)
# against the slow first engine of a process: three processes of one engine each (s19d/s19e: such an engine was
# slow 8 of 8 times), then one with the check off as the control; each prints what the check timed per decode
# executable (reloads included), then its C1 round and direct ticks.
BUDGET_S=${BUDGET_S:-480}
source benchmarks/campaign_lib.sh
for i in 1 2 3 off; do
  left=$((END - SECONDS)); [ $left -lt 40 ] && { echo "== p$i skipped"; continue; }
  mode=auto; extra=""; [ $i = off ] && { mode=off; extra=--replace; }  # control: also re-place params/state
  DGJAX_GRAPH_CHECK=$mode timeout $((left < 80 ? left : 80)) python3 -m benchmarks.mode_probe --preset qwen3-30b-a3b --quantize fp8 \
    --engines 1 --rounds 1 --direct 200 $extra --out $OUT/rounds.jsonl > $OUT/p$i.log 2>&1
  echo "== p$i rc $? ($SECONDS s)"
  grep -E "^round|graph check" $OUT/p$i.log | sed -E "s/pid=[0-9]+ //; s/cache=\{[^}]*\} ?//" | cut -c1-300
done
# Then the engine benchmark with the check on: qwen3 fp8 C1 twice, glm fp8 C1 once (their md files list what the
# check timed per decode executable under the engine line).
export DGJAX_GRAPH_CHECK=auto
run q_check1 70 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_check1
run q_check2 70 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_check2
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_check 100 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick glm_check
grep -h "graph check" $OUT/*/*.md | cut -c1-160
