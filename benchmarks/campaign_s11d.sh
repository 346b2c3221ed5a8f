# Prepared in session 10 for session 11 (~6 min): the o-weight L2 prefetch on llama-3.1-8b C1. The fused decode
# attention's extra programs read the first 16 MB of the bf16 o weight (33.5 MB) while the attention waits on its
# small loads; XLA's o GEMM then finds half of it in L2. On qwen3-30b-a3b fp8 (s10h) the o GEMV fell 0.9 µs a
# layer and the attention rose 0.4: inside the run-to-run spread. llama's o is 4x the bytes. Interleaved.
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
for i in 1 2; do
  run llama_$i 120 --preset llama-3.1-8b --concurrency 1
  DGJAX_PREFETCH_O=on run llama_prefetch_$i 120 --preset llama-3.1-8b --concurrency 1
done
for n in llama_1 llama_prefetch_1; do grep -h -E "fused_decode|gemm_fusion_dot\`" $OUT/$n/*.md | head -3; done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
