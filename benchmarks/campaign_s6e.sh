# Session 6: the engines with dgjax's default --xla_gpu_graph_min_graph_size=1 (dgjax/xla_flags.py), plus one
# A/B without it (DGJAX_DEFAULT_XLA_FLAGS=0) on qwen3-30b-a3b fp8, whose host was slower than its device.
python3 -m pip install --no-deps -q llguidance-*.whl
B="--contexts 1024 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
run() { name=$1; shift; timeout ${T:-110} python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
        echo "== $name"; grep -E "^\| 1024|Error" $OUT/$name/*.md $OUT/$name.log | head -3 | cut -d'|' -f2-9,12-16; }
run qwen3_fp8 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_DEFAULT_XLA_FLAGS=0 run qwen3_fp8_noflag --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
run qwen3_bf16 --preset qwen3-30b-a3b --concurrency 1
run llama --preset llama-3.1-8b --concurrency 1,4
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 T=170 run glm --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
