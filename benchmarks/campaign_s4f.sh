# Session 4, call 7: the session's final defaults (split merge kernel on, GEMV kernel opt-in): llama-3.1-8b's
# issue-3 table (C1/C4/C16 at 1K and 8K) and qwen3-30b-a3b C4.
python3 -m pip install --no-deps -q llguidance-*.whl
L=$OUT/campaign.log
timeout 210 python3 -m benchmarks.decode_bench --preset llama-3.1-8b --split-engines --contexts 1024,8192 \
    --concurrency 1,4,16 --decode-tokens 64 --out $OUT/llama > $L 2>&1
timeout 110 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 --concurrency 4 \
    --decode-tokens 64 --out $OUT/qwen3 >> $L 2>&1
grep -E "Error" $L | head -5; for f in $OUT/*/*.md; do echo $f; grep -E "^\| (1024|8192|2048)" $f; done
