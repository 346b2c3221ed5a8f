# Session 8, GPU call 5 (~4.5 min): the fused decode attention split sweep (device-trace timed) and the H200's own decode HLO
# for qwen3 fp8 (against benchmarks/deviceless_hlo.py's count), with what device time was left.
python3 -m pip install --no-deps -q llguidance-*.whl
timeout 150 python3 -m benchmarks.fused_decode_check --batches 1,4 --contexts 1024 --max-len 2064 \
    --splits 0,1,2,4,8,16 > $OUT/splits.log 2>&1
grep -E "^\| |Error" $OUT/splits.log | head -40
timeout 100 python3 -m benchmarks.dump_decode_hlo --preset qwen3-30b-a3b --quantize fp8 --out $OUT/hlo \
    > $OUT/layer_launches.txt 2>&1; head -24 $OUT/layer_launches.txt | cut -c1-160
