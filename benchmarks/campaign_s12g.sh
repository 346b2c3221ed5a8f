# Session 12 (~2 min): the attention's launch rule after s12f (long tables double their splits only in the
# one-stream bucket) at the engine's 1K tables (2064 keys): 16 rows 3 vs 6 splits of 128-key steps (s11's
# engine took 6 x 128 at 588.6 µs a tick against 601.7-618.0 for 3 x 64), and 4 rows 9 x 64 (the paged rule,
# unchanged) against 9 x 128 and 18 x 128; twice each.
BUDGET_S=${BUDGET_S:-200}
source benchmarks/campaign_lib.sh
for i in 1 2; do
  timeout 70 python3 -m benchmarks.fused_decode_check --shapes llama-3.1-8b --contexts 1024 --max-len 2064 \
      --batches 4,16 --splits 0,3,6,9,18 --block-tokens 0,64,128 > $OUT/k1_$i.log 2>&1
  echo "== 1K table $i"; grep -E "^\| llama" $OUT/k1_$i.log | cut -d'|' -f3-5,10-12
done
