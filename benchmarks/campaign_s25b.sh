# Session 25 (~4 min), after s25a: the bf12 GEMV with the PTX tile decode (lossless 12-bit bf16) against XLA's bf16 dot and the fp8 GEMV at
# llama-3.1-8b's projection shapes, 1/4/16 rows, each checked against the reference; a launch sweep at 1 row.
source benchmarks/campaign_lib.sh
timeout 300 python3 -m benchmarks.quant_gemv_check --formats bf12 fp8 --rows 1 4 16 --budget-s 240 > $OUT/gemv.log 2>&1
echo "== gemv rc $? ($SECONDS s)"; grep -E "^\||^read|^device" $OUT/gemv.log | grep -v -- "---"
timeout 200 python3 -m benchmarks.quant_gemv_check --formats bf12 --rows 1 --sweep --budget-s 150 > $OUT/sweep.log 2>&1
echo "== sweep rc $? ($SECONDS s)"; grep -E "^\||^    bn|^qkv|^o |^gate|^down" $OUT/sweep.log | grep -v -- "---" | head -60
