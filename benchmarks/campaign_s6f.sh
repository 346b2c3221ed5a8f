# Session 6, last call: router top-k by ranking (moe_routing/ref.py top_k_by_rank) instead of XLA's sort, in the
# three MoE engines at C1; compare device ms/tick and the kernel table with campaign_s6e (same code but the sort).
python3 -m pip install --no-deps -q llguidance-*.whl
B="--contexts 1024 --concurrency 1 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
run() { name=$1; shift; timeout ${T:-100} python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
        echo "== $name"; grep -E "^\| 1024|Error" $OUT/$name/*.md $OUT/$name.log | head -2 | cut -d'|' -f2-9,12-16
        grep -A8 "### Device time" $OUT/$name/*.md | tail -6 | cut -c1-100; }
run qwen3_fp8 --preset qwen3-30b-a3b --quantize fp8
run qwen3_bf16 --preset qwen3-30b-a3b
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 T=150 run glm --preset glm-4.5-air --quantize fp8
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
