# Session 22 (~2.5 min, warm machine): more qwen3-30b-a3b fp8 C1 samples with the f16 carry on / off. s22c-d: the
# carry's three runs all landed in the slow mode (no kernel overlap; 338.4-343.5 tok/s, busy 2.82-2.83 ms a tick)
# against off at 332.7 / 332.9 slow (2.90 ms) and 367.1 fast (2.78 ms).
BUDGET_S=${BUDGET_S:-160}
source benchmarks/campaign_lib.sh
q() { run $1 60 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick $1; }
q q_on_4
q q_on_5
DGJAX_F16_CARRY=off q q_off_4
q q_on_6
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
