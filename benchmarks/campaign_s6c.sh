# Session 6, after the float16 fp8 dot became the default: (1) where each decode tick spends its device time,
# by kernel family (decode_bench's new breakdown), for qwen3-30b-a3b fp8 and bf16 and llama-3.1-8b bf16;
# (2) the fp8 small-batch expert launch with 64-column blocks (the f16 sweep's best) against the current
# 32-column one, in the engine. The launch is patched into this device copy only (the repo keeps its default).
python3 -m pip install --no-deps -q llguidance-*.whl
B="--contexts 1024 --concurrency 1 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
row() { echo "== $1"; grep -E "^\| 1024|Error" $OUT/$1/*.md $OUT/$1.log | head -2 | cut -d'|' -f2-9,12-15; }
timeout 110 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 $B --out $OUT/qwen3_fp8_bn32 > $OUT/qwen3_fp8_bn32.log 2>&1; row qwen3_fp8_bn32
timeout 110 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b $B --out $OUT/qwen3_bf16 > $OUT/qwen3_bf16.log 2>&1; row qwen3_bf16
timeout 110 python3 -m benchmarks.decode_bench --preset llama-3.1-8b $B --out $OUT/llama > $OUT/llama.log 2>&1; row llama
python3 - <<'PY'
p = "dgjax/pallas/moe_decode/kernel.py"
s = open(p).read()
old = "FP8_SMALL_BATCH = Config(Launch(32, 128, 2, unroll=2), Launch(32, 128, 1, unroll=2))"
assert old in s
open(p, "w").write(s.replace(old, "FP8_SMALL_BATCH = Config(Launch(64, 128, 2, unroll=2), Launch(64, 128, 1))"))
PY
timeout 110 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 $B --out $OUT/qwen3_fp8_bn64 > $OUT/qwen3_fp8_bn64.log 2>&1; row qwen3_fp8_bn64
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 timeout 170 python3 -m benchmarks.decode_bench --preset glm-4.5-air --quantize fp8 $B --out $OUT/glm_bn64 > $OUT/glm_bn64.log 2>&1; row glm_bn64
for d in qwen3_fp8_bn32 qwen3_bf16 llama glm_bn64; do echo "== $d kernels"; grep -A14 "### Device time" $OUT/$d/*.md | tail -12 | cut -c1-110; done
