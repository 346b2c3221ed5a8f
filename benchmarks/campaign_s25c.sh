# Session 25 (~6 min): llama-3.1-8b decode through the engine with its bf16 projections and lm_head re-encoded as
# bf12 (lossless; the bf12 GEMV) against plain bf16 in the same call, C1 and C4.
source benchmarks/campaign_lib.sh
l() { run $1 ${2:-100} --preset llama-3.1-8b "${@:3}"; show_tick $1; }
l l_bf12 100 --quantize bf12 --concurrency 1
l l_bf16 100 --concurrency 1
l l_bf12_c4 100 --quantize bf12 --concurrency 4
l l_bf16_c4 100 --concurrency 4
cd $OUT && tar czf runs.tgz */*.md && rm -rf */
