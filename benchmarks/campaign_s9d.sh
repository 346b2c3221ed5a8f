# Session 9 (~9 min): wide fp8 tiles. s9c's sweeps again showed a 128-column fp8 GEMV launch beating the
# default (glm q/k/v: bn128 s4 20.7 µs vs bn64 s2 23.2), and the fp8 down stage at the same µs as a bf16 one
# with twice the bytes: an fp8 K step (held to one 128-wide scale block) moves half the bytes of a bf16 step
# of the same tile. Sweep 64-256 columns, 4-8 warps and K splits, no unroll (benchmarks/launch_sweep.py
# --wide), qwen3-30b-a3b shapes then glm-4.5-air's. Then the s9a repeats the time allows.
BUDGET_S=570
source benchmarks/campaign_lib.sh
for group in qwen3 glm; do
  timeout 200 python3 -m benchmarks.launch_sweep --wide --budget-s 80 --out $OUT --fmts fp8 \
      --cases "$group experts,$group qkv,$group o" > $OUT/sweep_$group.log 2>&1
  mv $OUT/launch_sweep.md $OUT/launch_sweep_wide_$group.md
  echo "== sweep $group ($SECONDS s)"
  grep -E "\| (gemv|down|gate_up) \|" $OUT/launch_sweep_wide_$group.md | grep -v "n/a" | sort -t'|' -k2,2 -k4,4 -k6n \
      | awk -F'|' 'a[$2 $4]++<3 {print $2,$4,$5,$6,$9,$10}'
  grep "(default)" $OUT/launch_sweep_wide_$group.md | grep -v "| both |" | awk -F'|' '{print "default:",$2,$4,$5,$6,$9}'
done
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_a 95 --preset glm-4.5-air --quantize fp8 --concurrency 1
run qwen3_bf16_a 75 --preset qwen3-30b-a3b --concurrency 1
(cd $OUT && tar czf runs.tgz */ 2>/dev/null && rm -rf */)
