# Session 28: qwen3-30b-a3b heads (4 KV heads) at an 8K table get 33 splits of 64 keys in the one-stream bucket,
# 132 working programs with 4-block chains (ncu s28d: 19.6 µs, 0.9 TB/s); the long-table doubling starts at
# 384 keys a split. Splits x keys a step for qwen3-30b-a3b and glm-4.5-air heads at 8K (and 4K) keys.
source benchmarks/campaign_lib.sh
fdc() {  # NAME TIMEOUT ARGS
  local name=$1 t=$2; shift 2
  timeout $t python3 -m benchmarks.fused_decode_check "$@" > $OUT/$name.log 2>&1
  echo "== $name ($SECONDS s)"; grep -E "^device|^\| (llama|qwen|glm)|Error" $OUT/$name.log | cut -d'|' -f2-5,10-12
}
fdc q_8k 200 --shapes qwen3-30b-a3b,glm-4.5-air --batches 1 --padding-row --contexts 8192 --max-len 8416 \
  --splits 0,33,66,132 --block-tokens 0,64,128
fdc q_4k 150 --shapes qwen3-30b-a3b,glm-4.5-air --batches 1 --padding-row --contexts 4096 --max-len 4160 \
  --splits 0,33,66 --block-tokens 0,64,128
cd $OUT && tar czf runs.tgz *.log 2>/dev/null; rm -rf */ *.log
