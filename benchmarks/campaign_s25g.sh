# Session 25 (~3 min): the bf12 GEMV's K step (128 / 512 inputs against the default 256) at 2-4 stages, 1 row,
# on llama's large shapes (s25e swept stages and warps at 256 only).
source benchmarks/campaign_lib.sh
timeout 200 python3 -m benchmarks.quant_gemv_check --formats bf12 --rows 1 --shapes gate_up down qkv --sweep --sweep-block-k 128 512 --calls 100 --repeats 3 --budget-s 150 > $OUT/sweep.log 2>&1
echo "== sweep rc $? ($SECONDS s)"; grep -E "^\||^    bn|^qkv|^gate|^down" $OUT/sweep.log | grep -v -- "---" | head -150
