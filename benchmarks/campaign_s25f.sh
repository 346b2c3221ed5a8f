# Session 25 (~3 min): llama-3.1-8b --quantize bf12 after s25e (2-stage bf12 launches; the reference decode for
# prefill chunks without 32-bit temporaries), C1 and C4; bf16 numbers of the same machine are s25c's.
source benchmarks/campaign_lib.sh
l() { run $1 ${2:-100} --preset llama-3.1-8b "${@:3}"; show_tick $1; }
l l_bf12 100 --quantize bf12 --concurrency 1
l l_bf12_c4 100 --quantize bf12 --concurrency 4
cd $OUT && tar czf runs.tgz */*.md && rm -rf */
