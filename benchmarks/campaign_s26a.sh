# Session 26 (~8 min): the split-K attention merge above 2 rows. XLA's merge (ref.py, rewritten this session to
# merge the real group rows only, the split weights over the denominator first) against the Pallas merge kernel
# at every width (DGJAX_SPLIT_MERGE_ROWS=64), interleaved: llama-3.1-8b C4 (two pairs) and C16, qwen3-30b-a3b
# fp8 C4 and bf16 C4.
source benchmarks/campaign_lib.sh
l() { run $1 ${2:-100} --preset llama-3.1-8b "${@:3}"; show_tick $1; }
l l4_xla 100 --concurrency 4
DGJAX_SPLIT_MERGE_ROWS=64 l l4_kern 100 --concurrency 4
l l16_xla 110 --concurrency 16
DGJAX_SPLIT_MERGE_ROWS=64 l l16_kern 110 --concurrency 16
run q4_xla 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 4; show_tick q4_xla
DGJAX_SPLIT_MERGE_ROWS=64 run q4_kern 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 4; show_tick q4_kern
DGJAX_SPLIT_MERGE_ROWS=64 l l4_kern2 100 --concurrency 4
l l4_xla2 100 --concurrency 4
for n in l4_xla l4_kern l16_xla l16_kern q4_xla q4_kern l4_kern2 l4_xla2; do
  echo "== $n merge kernels"; grep -hE "^\| \`(loop_select|loop_slice|split_merge|fused_decode|input_reduce)" $OUT/$n/*.md | cut -d'|' -f2-4
done
cd $OUT && tar czf runs.tgz */*.md && rm -rf */
