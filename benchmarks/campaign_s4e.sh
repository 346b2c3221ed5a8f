# Session 4, call 6: which of the two new kernels cost device time in s4d? Per-kernel trace of qwen3-30b-a3b C1
# with both, then qwen3 and llama C1 with the GEMV kernel off (DGJAX_GEMV=ref: the split merge kernel alone).
python3 -m pip install --no-deps -q llguidance-*.whl
L=$OUT/campaign.log
timeout 150 python3 -m benchmarks.profile_decode --preset qwen3-30b-a3b --concurrency 1 --ticks 10 --top 30 \
    --out $OUT/prof > $L 2>&1
DGJAX_GEMV=ref timeout 130 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 --concurrency 1 \
    --decode-tokens 64 --trace-tokens 8 --out $OUT/qwen3-gemv-ref >> $L 2>&1
DGJAX_GEMV=ref timeout 130 python3 -m benchmarks.decode_bench --preset llama-3.1-8b --contexts 1024 --concurrency 1 \
    --decode-tokens 64 --trace-tokens 8 --out $OUT/llama-gemv-ref >> $L 2>&1
grep -A24 "^steady" $L | head -26; for f in $OUT/*/*.md; do echo $f; grep -E "^\| (1024|8192)" $f; done
