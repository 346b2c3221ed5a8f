# Session 7 (~9 min): the engines with the benchmark's decode recorder fixed. s7b measured them with the old
# recorder, which read the tick's `active` mask back from the device on every tick since the engine started
# keeping it on the device (session 6): llama C16 fell 3290 -> 2203 tok/s there with the device time unchanged.
# Compare with s6e/s6f (qwen3 fp8 310.6, glm fp8 150.5, llama C1 241.1, C4 921.4; s4 C16 3290.0).
python3 -m pip install --no-deps -q llguidance-*.whl
B="--contexts 1024 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
END=$((SECONDS + 575))
run() { name=$1; t=$2; shift 2; left=$((END - SECONDS)); [ $left -lt 60 ] && { echo "== $name skipped"; return; }
        [ $t -gt $left ] && t=$left
        timeout $t python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
        echo "== $name ($SECONDS s)"; grep -E "^\| 1024|Error" $OUT/$name/*.md $OUT/$name.log | head -3 | cut -d'|' -f2-9,12-16
        grep -E "compiled in" $OUT/$name.log | tr '\n' ' ' | cut -c1-400; echo; }
run llama 130 --preset llama-3.1-8b --concurrency 1,4,16
run qwen3_fp8 190 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm 170 --preset glm-4.5-air --quantize fp8 --concurrency 1
run qwen3_bf16 150 --preset qwen3-30b-a3b --concurrency 1
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
