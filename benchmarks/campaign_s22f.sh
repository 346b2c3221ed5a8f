# Session 22 (~3.5 min): the carry as it lands (s22c-e had the experts' gate/up rows carried too, which made the
# router's GEMM 115 vs 89 µs a tick and the gate/up stage 560 vs 536; now only q/k/v, o and down): qwen3-30b-a3b
# fp8 C1, carry on three times and off once.
BUDGET_S=${BUDGET_S:-210}
source benchmarks/campaign_lib.sh
q() { run $1 90 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick $1; }
q q_on_7
DGJAX_F16_CARRY=off q q_off_5
q q_on_8
q q_on_9
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
