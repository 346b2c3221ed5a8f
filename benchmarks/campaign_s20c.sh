# Session 20 (~4 min): the graph check timing a working row (slot 0 into the trash page) instead of padding rows
# (s20b: padding ticks timed ~2.85 ms in fast and slow engines alike, so the check could not tell the modes).
# One single-engine mode_probe process, then qwen3 fp8 C1 through decode_bench three times with the check and
# once without (s20b with the padding-row check: 336.8 slow, 370.1 fast).
BUDGET_S=${BUDGET_S:-300}
source benchmarks/campaign_lib.sh
DGJAX_GRAPH_CHECK=auto timeout 90 python3 -m benchmarks.mode_probe --preset qwen3-30b-a3b --quantize fp8 \
  --engines 1 --rounds 2 --direct 200 --out $OUT/rounds.jsonl > $OUT/p1.log 2>&1
echo "== p1 rc $? ($SECONDS s)"
grep -E "^round" $OUT/p1.log | sed -E "s/pid=[0-9]+ //; s/cache=\{[^}]*\} ?//; s/dispatch_host_ms=[^ ]+ //" | cut -c1-330
for i in 1 2 3; do DGJAX_GRAPH_CHECK=auto run q$i 60 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; done
DGJAX_GRAPH_CHECK=off run q_off 60 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
grep -h "graph check" $OUT/*/*.md | cut -c1-160
