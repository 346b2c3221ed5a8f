# Session 25 (~4 min): s25c's bf12 runs again with the bf12 GEMV validated for the engine's auto dispatch (s25c
# ran the reference: 72 ms a step); llama-3.1-8b C1 and C4.
source benchmarks/campaign_lib.sh
l() { run $1 ${2:-100} --preset llama-3.1-8b "${@:3}"; show_tick $1; }
l l_bf12 100 --quantize bf12 --concurrency 1
l l_bf12_c4 100 --quantize bf12 --concurrency 4
cd $OUT && tar czf runs.tgz */*.md && rm -rf */
