# Session 18, the last ~160 s of device time: the fp8 scale loaded one step ahead (DGJAX_FP8_SCALE=prefetch)
# against the in-step scalar (auto) on the default launches only (--budget-s 1: each case's first, default launch),
# glm q/k/v (the largest in-step scale wait under ncu) and qwen3's experts. No engine runs (campaign_s19a has them).
python3 -m pip install --no-deps -q llguidance-*.whl 2>/dev/null
for mode in ${MODES:-prefetch auto}; do
  DGJAX_FP8_SCALE=$mode timeout 40 python3 -m benchmarks.launch_sweep --budget-s 1 --fmts fp8 --wide \
    --cases "glm qkv,qwen3 experts" --calls 5 > $OUT/sweep.log 2>&1
  echo "== $mode ($SECONDS s)"; 
  sed -n "/best per case/,\$p" $OUT/sweep.log 2>/dev/null | grep "default" | cut -c1-120
  cat $OUT/sweep.log >> $OUT/all.log
done
