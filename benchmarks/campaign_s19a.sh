# Prepared in session 18 for the next device call (~9 min): fp8 scales loaded one K step ahead
# (DGJAX_FP8_SCALE=prefetch, opt-in) against the in-step scalar (auto, default): the fp8 launch sweeps (glm and
# qwen3 shapes) both ways, then glm-4.5-air fp8 C1 and qwen3-30b-a3b fp8 C1 through the engine, alternated.
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
CASES="glm qkv,glm experts,qwen3 experts,qwen3 qkv"
for mode in prefetch auto; do
  DGJAX_FP8_SCALE=$mode timeout 100 python3 -m benchmarks.launch_sweep --budget-s 25 --fmts fp8 --wide --cases "$CASES" \
    --out $OUT/sweep_$mode > $OUT/sweep_$mode.log 2>&1
  echo "== sweep $mode ($SECONDS s)"; sed -n '/best per case/,$p' $OUT/sweep_$mode.log | grep default | cut -c1-150
done
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
DGJAX_FP8_SCALE=prefetch run glm_pf 120 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick glm_pf
run glm_auto 90 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick glm_auto
unset XLA_PYTHON_CLIENT_MEM_FRACTION
DGJAX_FP8_SCALE=prefetch run q_pf 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_pf
run q_auto 70 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_auto
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)
