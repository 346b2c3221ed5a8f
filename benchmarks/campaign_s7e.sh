# Session 7 (~5 min): compile time after the fixes s7d pointed to (the fused decode kernel takes its norm row
# as an argument; prefill takes the unpacked parameters), then qwen3 fp8 C1 decode to check the tick kept
# its speed (s7c: 315.0 tok/s, dispatch 3.24 ms/tick, load + compile 95.7 s).
python3 -m pip install --no-deps -q llguidance-*.whl
timeout 150 python3 -m benchmarks.compile_time --preset qwen3-30b-a3b --chunk 2048 --variants packed,none 2>&1 \
    | tee $OUT/compile.log | grep -v Warn
timeout 150 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 --concurrency 1 --contexts 1024 \
    --prefill 2048 --decode-tokens 64 --trace-tokens 8 --out $OUT/qwen3_fp8 > $OUT/qwen3_fp8.log 2>&1
grep -E "^\| 1024|load \+ compile:" $OUT/qwen3_fp8/*.md | cut -c1-200
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
