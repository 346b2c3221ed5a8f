# Prepared in session 15 for session 16 (~8 min), after campaign_s16a.sh: two switches that earlier sessions
# left lost or undecided under conditions that have since changed.
# 1) PDL triggers on glm-4.5-air fp8 (DGJAX_PDL_TRIGGER=auto: Pallas kernels let the next kernel launch early).
#    s13 had them lose there (164.2 / 164.2 against 167.7 / 167.6) with XLA's serial graph; glm's graph is now
#    scheduled concurrently (s15a: 178.2 / 178.4), where an early-launched kernel may find a free branch.
# 2) qwen3-30b-a3b fp8's down stage split in two (DGJAX_MOE_DOWN_SPLITS=2): s13 left it undecided because three
#    of its four runs fell in the slow mode, which stable buffers (s15e) seem to have removed.
# Greedy fingerprints must agree within a preset.
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
for i in 1 2; do
  run glm_$i 150 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick glm_$i
  DGJAX_PDL_TRIGGER=auto run glm_pdl_$i 150 --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick glm_pdl_$i
done
unset XLA_PYTHON_CLIENT_MEM_FRACTION
for i in 1 2; do
  run q_$i 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick q_$i
  DGJAX_MOE_DOWN_SPLITS=2 run q_down2_$i 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
  show_tick q_down2_$i
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
