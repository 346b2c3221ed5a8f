# Session 8, call 3 (~9 min), after s8d. The new defaults, with no switches set:
# - DGJAX_QUANT_GEMV_FUSE=splits (s8d: qwen3 fp8 C1 355.2 tok/s against 316.9 with none and 256-285 with all);
# - DGJAX_MOE_FUSE=none, DGJAX_ADD_NORM auto = ref, the XLA routing with the logits padding rule.
# Presets: qwen3-30b-a3b fp8 C1/4, qwen3-30b-a3b bf16 C1/4, llama-3.1-8b C1/4/16 (s7c: 229.7 / 913.8 /
# 3232.4), and glm-4.5-air fp8 C1 with and without DGJAX_ROUTING_PAD=ids. glm's s8d run gave 143.6 tok/s on
# 6.70 ms of device time, where s7c gave 150.3 on 6.75 ms.
python3 -m pip install --no-deps -q llguidance-*.whl
END=$((SECONDS + 560))
B="--contexts 1024 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
run() { name=$1; t=$2; shift 2; left=$((END - SECONDS)); [ $left -lt 45 ] && { echo "== $name skipped"; return; }
        [ $t -gt $left ] && t=$left
        timeout $t python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
        echo "== $name ($SECONDS s)"; grep -hE "^\| 1024|Error" $OUT/$name/*.md $OUT/$name.log | head -3 | cut -d'|' -f2-9,12-16; }
run qwen3_fp8 120 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1,4
run qwen3_bf16 120 --preset qwen3-30b-a3b --concurrency 1,4
run llama 120 --preset llama-3.1-8b --concurrency 1,4,16
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm 120 --preset glm-4.5-air --quantize fp8 --concurrency 1
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 DGJAX_ROUTING_PAD=ids run glm_padids 100 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
