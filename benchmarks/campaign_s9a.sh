# Prepared in session 8 for session 9 (~9 min). Not covered by session 8's GPU calls (s8a, s8d-f):
# - the fused decode attention's split count at the engine's table width: 2064 tokens give 33 splits at one
#   stream by default, and attention plus merge take ~9 µs of a qwen3 layer at 1K context. Timed from the
#   device trace.
# - the GPU's own decode HLO for qwen3 fp8, to check benchmarks/deviceless_hlo.py's per-layer count against it;
# - llama-3.1-8b C1 at 8K context (issue 3: >= 250 tok/s).
# - the host-side bimodality session 8 saw: the same device time per tick gave glm 143 or 150 tok/s, and
#   qwen3 bf16 300 or 323, in different runs of one preset. Here glm runs three times.
python3 -m pip install --no-deps -q llguidance-*.whl
END=$((SECONDS + 560))
B="--prefill 2048 --decode-tokens 64 --trace-tokens 8"
run() { name=$1; t=$2; shift 2; left=$((END - SECONDS)); [ $left -lt 45 ] && { echo "== $name skipped"; return; }
        [ $t -gt $left ] && t=$left
        timeout $t python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
        echo "== $name ($SECONDS s)"; grep -hE "^\| [0-9]+ \||Error" $OUT/$name/*.md $OUT/$name.log | head -3 | cut -d'|' -f2-9,12-16; }
timeout 170 python3 -m benchmarks.fused_decode_check --batches 1,4 --contexts 1024 --max-len 2064 \
    --splits 0,1,2,4,8,16 > $OUT/splits.log 2>&1
grep -E "^\| (llama|qwen3)|Error" $OUT/splits.log
timeout 90 python3 -m benchmarks.dump_decode_hlo --preset qwen3-30b-a3b --quantize fp8 --out $OUT/hlo \
    > $OUT/layer_launches.txt 2>&1; head -24 $OUT/layer_launches.txt | cut -c1-150
run llama_8k 120 --preset llama-3.1-8b --concurrency 1 --contexts 8192
for i in 1 2 3; do XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_$i 100 --preset glm-4.5-air --quantize fp8 --concurrency 1 --contexts 1024; done
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
