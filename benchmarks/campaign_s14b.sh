# Prepared in session 13 for session 14 (~9 min): PDL triggers at the end of the Pallas kernels
# (DGJAX_PDL_TRIGGER_AT=end: after the weight stream, where the result goes to the store; dgjax/pallas/pdl.py)
# against none, on the MoE presets that lost 1.5-2% with triggers at the start (s13c-e), and against the start
# position on llama-3.1-8b, which gained with it. First (s14: the PDL census was dropped for device time): the MoE kernels against ref.py with the end trigger.
BUDGET_S=${BUDGET_S:-480}
source benchmarks/campaign_lib.sh
DGJAX_PDL_TRIGGER=on DGJAX_PDL_TRIGGER_AT=end timeout 90 python3 -m benchmarks.moe_kernel_check --preset qwen3-30b-a3b \
    --formats fp8 --tokens 1,2 > $OUT/check_end.log 2>&1
echo "== moe check, trigger at end: rc $?"; grep -E "^\| qwen3" $OUT/check_end.log | head -4
show() { grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'
         grep -h -A8 "Launch edges" $OUT/$1/*.md | grep '^| [a-z]*>' ; }
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
for i in 1 2; do
  run glm_off_$i 150 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_off_$i
  DGJAX_PDL_TRIGGER=auto DGJAX_PDL_TRIGGER_AT=end run glm_end_$i 120 --preset glm-4.5-air --quantize fp8 \
      --concurrency 1; show glm_end_$i
done
unset XLA_PYTHON_CLIENT_MEM_FRACTION
for i in 1; do  # s14: one pair (device time); qwen3 fp8 C1 is bimodal, so one pair decides nothing alone
  run qwen3_off_$i 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show qwen3_off_$i
  DGJAX_PDL_TRIGGER=auto DGJAX_PDL_TRIGGER_AT=end run qwen3_end_$i 90 --preset qwen3-30b-a3b --quantize fp8 \
      --concurrency 1; show qwen3_end_$i
done
run llama_start_1 70 --preset llama-3.1-8b --concurrency 1; show llama_start_1
DGJAX_PDL_TRIGGER_AT=end run llama_end_1 60 --preset llama-3.1-8b --concurrency 1; show llama_end_1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
