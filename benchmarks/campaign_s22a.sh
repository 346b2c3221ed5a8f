# Prepared in session 21 (~7 min): what the per-step x work costs the fp8 kernels. Every fp8 dot mode re-derives
# x's rows in every program's every K step (f16: row max, power-of-two scale, f16 convert; a8: the same to e4m3;
# a8x2: two terms); s21 found a8x2's extra x work cancelling a8's ~110 µs a tick. If it is large, x should be
# converted once where it is produced (XLA's norm / activation fusions) and loaded as tiles. Trace-timed
# (launch_sweep --default-only; s21's first try with quant_gemv_check's wall clock was noise): the default
# (bf16 rows, f16 dot), DGJAX_FP8_DOT=x on float16 rows (the same paired weight conversion, no x work), a8 and
# a8x2 on bf16 rows, then the first two again. Dense q/k/v and o of qwen3-30b-a3b and glm-4.5-air at 2 rows.
BUDGET_S=${BUDGET_S:-420}
source benchmarks/campaign_lib.sh
S=${S:-"--only dense --default-only --budget-s 60"}
CASES=${CASES:-"qwen3 qkv,qwen3 o,glm qkv,glm o"}
for arm in "f16 bfloat16" "x float16" "a8 bfloat16" "a8x2 bfloat16" "f16 bfloat16" "x float16"; do
  set -- $arm
  left=$((END - SECONDS)); [ $left -lt 40 ] && { echo "== $1 $2 skipped"; continue; }
  DGJAX_FP8_DOT=$1 timeout $((left < 100 ? left : 100)) python3 -m benchmarks.launch_sweep $S --cases "$CASES" --x-dtype $2 \
    > $OUT/sweep_$1_$2_$SECONDS.log 2>&1
  echo "== $1 $2 rc $? ($SECONDS s)"; grep -hE "\| gemv \|" $(ls -t $OUT/sweep_$1_$2_*.log | head -1) | cut -c1-150
done
