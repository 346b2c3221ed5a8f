# Session 10 (the last ~4 device minutes): qwen3-30b-a3b fp8 C1 with DGJAX_PREFETCH_O=on (extra programs of the
# fused decode attention read the o projection's fp8 weight into L2 while the attention waits on its small
# loads; the o GEMV then reads L2: 3.9 µs L2-warm vs ~6.7 from HBM, s10d). One run; the same defaults
# without it ran 359.8-364.1 tok/s in four runs today (s10a, s10d, s10e).
BUDGET_S=200
B="--contexts 1024 --prefill 2048 --decode-tokens 192 --trace-tokens 8"
source benchmarks/campaign_lib.sh
DGJAX_PREFETCH_O=on run qwen3_prefetch 150 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
grep -h -E "fused_decode|quant_gemv|split_merge" $OUT/qwen3_prefetch/*.md | head -6
(cd $OUT && tar czf runs.tgz */ 2>/dev/null && rm -rf */)
