# Prepared in session 22 (~8 min): the f16 carry as it landed has no fast-mode qwen3 sample yet (s22f: three runs,
# all slow, 349.6-350.4 tok/s, busy 2.75 ms; off 367.8 fast at 2.79). Interleaved qwen3-30b-a3b fp8 C1 on / off
# until the budget ends, so each arm draws both modes; then glm-4.5-air fp8 C1 once (s22c-d: 185.9 / 186.0).
BUDGET_S=${BUDGET_S:-480}
source benchmarks/campaign_lib.sh
for i in 1 2; do q q_on_$i; DGJAX_F16_CARRY=off q q_off_$i; done
q q_on_3
g g_on_1  # q and g: campaign_lib.sh
# then, where time is left, the experts' gate/up stage alone on bf16 and on f16 rows (s22: carried f16 rows made it
# 560 vs 536 µs a tick in the engine although its loop compiles to fewer instructions)
for dt in bfloat16 float16; do
  left=$((END - SECONDS)); [ $left -lt 50 ] && { echo "== sweep $dt skipped"; continue; }
  timeout $((left < 100 ? left : 100)) python3 -m benchmarks.launch_sweep --only moe --default-only --fmts fp8 \
    --cases "qwen3 experts" --x-dtype $dt --budget-s 60 > $OUT/sweep_moe_$dt.log 2>&1
  echo "== sweep $dt rc $? ($SECONDS s)"; grep -E "^\| qwen3 experts \| fp8 \| (gate_up|down|both)" $OUT/sweep_moe_$dt.log | cut -c1-120
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
