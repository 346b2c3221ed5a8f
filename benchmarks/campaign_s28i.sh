# Session 28: at 2 stages Triton's pipeliner keeps one K/V buffer (block i + 1's copies start after block i's math,
# and wait at once); 3 stages double-buffer (TTGIR: async_wait num=3), and with next:rows the block-table read
# leaves the copy chain. Next-block rows x stages x keys a step, kernel alone, C1 at 8K / 32K and 16 rows at 8K.
source benchmarks/campaign_lib.sh
fdc() {  # NAME TIMEOUT ARGS
  local name=$1 t=$2; shift 2
  timeout $t python3 -m benchmarks.fused_decode_check --shapes llama-3.1-8b,qwen3-30b-a3b --next-block none,rows \
    --stages 2,3 --block-tokens 64,128 "$@" > $OUT/$name.log 2>&1
  echo "== $name ($SECONDS s)"; grep -E "^device|^\| (llama|qwen)|Error" $OUT/$name.log | cut -d'|' -f2-5,10-12
}
fdc c1_8k 150 --batches 1 --padding-row --contexts 8192 --max-len 8416
fdc c1_32k 150 --batches 1 --padding-row --contexts 32768 --max-len 33024
fdc c16_8k 150 --batches 16 --contexts 8192 --max-len 8416
cd $OUT && tar czf runs.tgz *.log 2>/dev/null; rm -rf */ *.log
