# Session 20 (~7 min): the reworked graph check (DGJAX_GRAPH_CHECK=auto: time the narrowest decode tick, move one
# small parameter array until a timing is near the best seen, dgjax/runtime/graph_check.py) in the engine.
# First three single-engine mode_probe processes (the first engine of a process was slow 8 of 8 times before;
# each prints the check's timings and then two engine rounds: does the engine keep the mode the check left?),
# then decode_bench with the check: qwen3 fp8 C1 x2, glm fp8 C1, llama C4 (all bimodal before).
BUDGET_S=${BUDGET_S:-420}
source benchmarks/campaign_lib.sh
export DGJAX_GRAPH_CHECK=auto
for i in 1 2 3; do
  left=$((END - SECONDS)); [ $left -lt 40 ] && { echo "== p$i skipped"; continue; }
  timeout $((left < 90 ? left : 90)) python3 -m benchmarks.mode_probe --preset qwen3-30b-a3b --quantize fp8 \
    --engines 1 --rounds 2 --direct 200 --out $OUT/rounds.jsonl > $OUT/p$i.log 2>&1
  echo "== p$i rc $? ($SECONDS s)"
  grep -E "^round" $OUT/p$i.log | sed -E "s/pid=[0-9]+ //; s/cache=\{[^}]*\} ?//; s/dispatch_host_ms=[^ ]+ //" | cut -c1-330
done
run q1 70 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q1
run q2 70 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q2
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm 100 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick glm
run llama_c4 90 --preset llama-3.1-8b --concurrency 4; show_tick llama_c4
grep -h "graph check" $OUT/*/*.md | cut -c1-160
