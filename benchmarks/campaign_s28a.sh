# Session 28: does a head-major page layout ([pages, KVH, page, D]: a page's keys of one head contiguous) make the
# fused decode attention read faster than the engine's token-major pages? Kernel alone, device trace, llama and
# qwen3-30b-a3b heads, the engine's one-stream bucket (padding row) at 1K / 8K / 32K keys, then 4 and 16 rows at 8K.
source benchmarks/campaign_lib.sh
fdc() {  # NAME TIMEOUT ARGS
  local name=$1 t=$2; shift 2
  timeout $t python3 -m benchmarks.fused_decode_check --shapes llama-3.1-8b,qwen3-30b-a3b --layouts token,head "$@" \
    > $OUT/$name.log 2>&1
  echo "== $name ($SECONDS s)"; grep -E "^device|^\| (llama|qwen)|Error" $OUT/$name.log | cut -d'|' -f2-5,9-12
}
fdc c1_1k 100 --batches 1 --padding-row --contexts 1024 --max-len 2064
fdc c1_8k 120 --batches 1 --padding-row --contexts 8192 --max-len 8416
fdc c1_32k 150 --batches 1 --padding-row --contexts 32768 --max-len 33024
fdc wide_8k 150 --batches 4,16 --contexts 8192 --max-len 8416
cd $OUT && tar czf runs.tgz *.log 2>/dev/null; rm -rf */ *.log
