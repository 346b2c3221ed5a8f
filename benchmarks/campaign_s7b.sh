# Prepared in session 6 (~7 min): the engines after the host-side changes made without a device (KV pools, packed
# norm vectors, reused decode layouts). Compare each row's dispatch ms/tick and tok/s with
# benchmarks/results/2026-12-01-s6ef-xla-flags-and-rank-top-k.md (qwen3 fp8 3.27 ms / 310.6, qwen3 bf16 3.11 /
# 320.2, glm fp8 6.70 / 150.5, llama C1 4.19 / 241.1, C4 4.36 / 921.4).
python3 -m pip install --no-deps -q llguidance-*.whl
B="--contexts 1024 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
run() { name=$1; shift; timeout ${T:-110} python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
        echo "== $name"; grep -E "^\| 1024|Error" $OUT/$name/*.md $OUT/$name.log | head -3 | cut -d'|' -f2-9,12-16; }
run qwen3_fp8 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
run qwen3_bf16 --preset qwen3-30b-a3b --concurrency 1,4
T=150 run llama --preset llama-3.1-8b --concurrency 1,4,16
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 T=170 run glm --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
