# Session 18, same warm machine as campaign_s18e (vec F, auto S, vec F, auto S): is the slow mode tied to the
# scalar-scale kernels? One process per mode in $MODES (first call: auto auto vector auto), each its mode and
# its Pallas launch edge (negative: the fast mode).
BUDGET_S=${BUDGET_S:-200}
source benchmarks/campaign_lib.sh
for m in ${MODES:-auto auto vector auto}; do
  DGJAX_FP8_SCALE=$m run q_${m}_$SECONDS 60 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
done
for d in $OUT/q_*/; do n=$(basename $d); echo "$n: $(grep -h '^| 1024' $d/*.md | cut -d'|' -f5) tok/s; $(grep -h '^| pallas>pallas' $d/*.md | cut -d'|' -f4)"; done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)
