# Session 23 (~5 min): the f16 carry (session 22) at 4 streams, where it was never run: qwen3-30b-a3b fp8 C4 with
# the carry on (default) and off, interleaved (before it: 961 tok/s aggregate).
BUDGET_S=${BUDGET_S:-300}
source benchmarks/campaign_lib.sh
q4() { run $1 ${2:-100} --preset qwen3-30b-a3b --quantize fp8 --concurrency 4; show_tick $1; }
q4 q4_on_1; DGJAX_F16_CARRY=off q4 q4_off_1; q4 q4_on_2; DGJAX_F16_CARRY=off q4 q4_off_2
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
