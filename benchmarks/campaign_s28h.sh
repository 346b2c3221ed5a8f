# Session 28: the decode attention loading block i + 1's table rows (next:rows) or rows and keys (next:keys) before
# block i's math, against the loop as it is (next:none): kernel alone, llama-3.1-8b and qwen3-30b-a3b heads.
source benchmarks/campaign_lib.sh
fdc() {  # NAME TIMEOUT ARGS
  local name=$1 t=$2; shift 2
  timeout $t python3 -m benchmarks.fused_decode_check --shapes llama-3.1-8b,qwen3-30b-a3b --next-block none,rows,keys \
    "$@" > $OUT/$name.log 2>&1
  echo "== $name ($SECONDS s)"; grep -E "^device|^\| (llama|qwen)|Error" $OUT/$name.log | cut -d'|' -f2-5,7,10-12
}
fdc c1_8k 120 --batches 1 --padding-row --contexts 8192 --max-len 8416
fdc c1_32k 120 --batches 1 --padding-row --contexts 32768 --max-len 33024
fdc c1_1k 90 --batches 1 --padding-row --contexts 1024 --max-len 2064
fdc wide_8k 150 --batches 4,16 --contexts 8192 --max-len 8416
fdc c1_8k_w8 90 --batches 1 --padding-row --contexts 8192 --max-len 8416 --warps 8
cd $OUT && tar czf runs.tgz *.log 2>/dev/null; rm -rf */ *.log
