# Prepared in session 9 for session 10 (~7 min): wide tiles beyond one stream. s9's sweeps were at 2 rows
# (one stream); at 4 streams qwen3-30b-a3b fp8's gate/up ran at ~66% of the ceiling and down at ~52%
# (s8e: 28.2 and 17.9 µs a layer on ~26 experts), both with 64-column blocks from the split-to-fill rule.
# Sweep the wide launch set at 4 rows (fp8 experts and GEMVs), then bf16 experts at 2 rows (qwen3-30b-a3b
# bf16 C1: gate/up at 71%, down at 60% of the ceiling in s8f).
BUDGET_S=560
source benchmarks/campaign_lib.sh
timeout 250 python3 -m benchmarks.launch_sweep --wide --rows 4 --budget-s 100 --out $OUT --fmts fp8 \
    --cases "qwen3 experts,glm experts,qwen3 qkv,qwen3 o" > $OUT/sweep_r4.log 2>&1
mv $OUT/launch_sweep.md $OUT/launch_sweep_wide_r4.md
timeout 200 python3 -m benchmarks.launch_sweep --wide --only moe --rows 2 --budget-s 120 --out $OUT --fmts bf16 \
    --cases "qwen3 experts,glm experts" > $OUT/sweep_bf16.log 2>&1
mv $OUT/launch_sweep.md $OUT/launch_sweep_wide_bf16.md
for f in r4 bf16; do
  echo "== sweep $f ($SECONDS s)"
  grep -E "\| (gemv|both) \|" $OUT/launch_sweep_wide_$f.md | grep -v "n/a" | sort -t'|' -k2,2 -k4,4 -k6n \
      | awk -F'|' 'a[$2 $4]++<2 {print $2,$4,$5,$6,$9,$10}'
  grep "(default)" $OUT/launch_sweep_wide_$f.md | grep -E "\| (gemv|both) \|" | awk -F'|' '{print "default:",$2,$4,$5,$6,$9}'
done
