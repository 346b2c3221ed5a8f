# Prepared in session 18 (~2-3 min): fp8 launches with K split counts beyond powers of two (--balanced: 3-way
# uneven splits and the like), for grids that fill the SMs more evenly than today's defaults (ncu s18: qwen3's
# fp8 kernels leave an average SM without a program for 35-45% of their time).
BUDGET_S=${BUDGET_S:-200}
source benchmarks/campaign_lib.sh
timeout 180 python3 -m benchmarks.launch_sweep --budget-s 70 --fmts fp8 --balanced \
  --cases "qwen3 experts,qwen3 qkv,qwen3 o,glm experts,glm qkv" --out $OUT/sweep_balanced > $OUT/sweep_balanced.log 2>&1
echo "== balanced sweep ($SECONDS s)"; sed -n '/best per case/,$p' $OUT/sweep_balanced.log | cut -c1-150
