# Session 25 (~5 min): the bf12 GEMV's launch sweep at 1 row with 8 warps and 2 stages too (s25d: in the engine
# llama's gate/up read 3.1 TB/s of bf12 bytes at 4 warps, one 144 KB program an SM), then llama C1 again.
source benchmarks/campaign_lib.sh
timeout 330 python3 -m benchmarks.quant_gemv_check --formats bf12 --rows 1 --sweep --calls 100 --repeats 3 --budget-s 280 > $OUT/sweep.log 2>&1
echo "== sweep rc $? ($SECONDS s)"; grep -E "^\||^    bn|^qkv|^o |^gate|^down" $OUT/sweep.log | grep -v -- "---" | head -150
