# Session 4, call 3: what each small kernel of a qwen3-30b-a3b decode tick is (bf16 and fp8), from the HLO dump.
python3 -m pip install --no-deps -q llguidance-*.whl
L=$OUT/campaign.log
timeout 200 python3 -m benchmarks.profile_decode --preset qwen3-30b-a3b --concurrency 1 --ticks 10 --top 40 \
    --hlo-dump --out $OUT/bf16 > $L 2>&1
timeout 200 python3 -m benchmarks.profile_decode --preset qwen3-30b-a3b --quantize fp8 --concurrency 1 --ticks 10 \
    --top 40 --hlo-dump --out $OUT/fp8 > $OUT/fp8.log 2>&1
grep -E "steady|Error" $L $OUT/fp8.log
