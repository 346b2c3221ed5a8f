# Session 28: s28i's gain (3 stages + next:rows, 17 splits at 32K: 46.4 vs 55.4 µs) at the default launch (doubled
# splits): next-block none/rows x 2/3 stages, C1 at 8K / 16K / 32K, kernel alone.
source benchmarks/campaign_lib.sh
fdc() {  # NAME TIMEOUT ARGS
  local name=$1 t=$2; shift 2
  timeout $t python3 -m benchmarks.fused_decode_check --shapes llama-3.1-8b,qwen3-30b-a3b --next-block none,rows \
    --stages 2,3 --batches 1 --padding-row "$@" > $OUT/$name.log 2>&1
  echo "== $name ($SECONDS s)"; grep -E "^device|^\| (llama|qwen)|Error" $OUT/$name.log | cut -d'|' -f2-5,10-12
}
fdc c1_8k 100 --contexts 8192 --max-len 8416
fdc c1_16k 100 --contexts 16384 --max-len 16640
fdc c1_32k 120 --contexts 32768 --max-len 33024
cd $OUT && tar czf runs.tgz *.log 2>/dev/null; rm -rf */ *.log
