# Prepared in session 21 (~6 min): what the per-step x work costs the fp8 GEMV. Every fp8 dot mode re-derives
# x's rows in every program's every K step (f16: a row max, power-of-two scale, f16 convert; a8: the same to
# e4m3; a8x2: two terms); s21 found a8x2's extra x work cancelling a8's ~110 µs a tick. If it is large, x should
# be converted once where it is produced (XLA's norm / activation fusions) and loaded as tiles. Rows: the
# default (bf16 rows, f16 dot), DGJAX_FP8_DOT=x on float16 rows (the same paired weight conversion, no x work),
# a8 on bf16 rows; qwen3-30b-a3b's and llama-3.1-8b's q/k/v and o at 1 and 2 rows, HBM-cold (distinct weights).
BUDGET_S=${BUDGET_S:-420}
source benchmarks/campaign_lib.sh
S=${S:-"--shapes qwen3_qkv qwen3_o qkv o --formats fp8 --rows 1 2 --budget-s 100"}
for arm in "f16 bfloat16" "x float16" "a8 bfloat16" "f16 bfloat16" "x float16"; do
  set -- $arm
  left=$((END - SECONDS)); [ $left -lt 40 ] && { echo "== $1 $2 skipped"; continue; }
  DGJAX_FP8_DOT=$1 timeout $((left < 130 ? left : 130)) python3 -m benchmarks.quant_gemv_check $S --x-dtype $2 \
    > $OUT/gemv_$1_$2_$SECONDS.log 2>&1
  echo "== $1 $2 rc $? ($SECONDS s)"; grep -hE "^\| (qwen3_|qkv|o) " $OUT/gemv_$1_$2_*.log | tail -8 | cut -d'|' -f2-8,12
done
