# Prepared in session 7 (~3 min): the fused decode attention's split count at the engine's table width
# (2064 tokens: default 33 splits at one stream), timed from the device trace this time (s7a's wall-clock
# numbers were dispatch). At 1K context a qwen3 tick spends ~8.6 µs per layer in attention + split merge.
python3 -m pip install --no-deps -q llguidance-*.whl
timeout 300 python3 -m benchmarks.fused_decode_check --batches 1,4 --contexts 1024 --max-len 2064 \
    --splits 0,1,2,4,8,16 > $OUT/splits.log 2>&1
grep -E "^\| (llama|qwen3)|Error" $OUT/splits.log
