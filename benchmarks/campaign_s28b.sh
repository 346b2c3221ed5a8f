# Session 28: the decode attention's launch at long tables (the default rule was swept at 8K keys only, s11a/s12a):
# splits x keys a step x pipeline depth at 32K keys (one-stream bucket), a split ladder at 16K, and splits for 4
# rows at 8K. Kernel alone (fused_decode_check, device trace), llama-3.1-8b and qwen3-30b-a3b heads.
source benchmarks/campaign_lib.sh
fdc() {  # NAME TIMEOUT ARGS
  local name=$1 t=$2; shift 2
  timeout $t python3 -m benchmarks.fused_decode_check --shapes llama-3.1-8b,qwen3-30b-a3b "$@" > $OUT/$name.log 2>&1
  echo "== $name ($SECONDS s)"; grep -E "^device|^\| (llama|qwen)|Error" $OUT/$name.log | cut -d'|' -f2-5,10-12
}
fdc c1_32k 240 --batches 1 --padding-row --contexts 32768 --max-len 33024 --splits 0,68,136,272 --block-tokens 0,64 \
  --stages 0,3
fdc c1_16k 100 --batches 1 --padding-row --contexts 16384 --max-len 16640 --splits 0,68,136
fdc c4_8k 120 --batches 4 --contexts 8192 --max-len 8416 --splits 0,18,33,66
cd $OUT && tar czf runs.tgz *.log 2>/dev/null; rm -rf */ *.log
