# Prepared in session 12 for session 13 (~8 min): early PDL triggers in every Pallas kernel (DGJAX_PDL_TRIGGER=on,
# dgjax/pallas/pdl.py). XLA's kernels wait for their predecessor at entry, and in a deviceless compile
# (jax 0.10.2) none triggers its dependents early, Pallas kernels included, so the kernel after each one is
# admitted only when it has exited. 1) correctness on the GPU with the trigger on: the MoE decode kernels against ref.py at
# qwen3-30b-a3b fp8 shapes (chained calls in one executable); 2) qwen3-30b-a3b fp8 C1 (6 Pallas kernels a
# layer) and llama-3.1-8b C1 (2) with the trigger off and on, interleaved twice. Adopt if both pairs agree.
BUDGET_S=${BUDGET_S:-570}
source benchmarks/campaign_lib.sh
DGJAX_PDL_TRIGGER=on timeout 90 python3 -m benchmarks.moe_kernel_check --preset qwen3-30b-a3b --formats fp8 \
    --tokens 1,2 > $OUT/check_on.log 2>&1
echo "== moe check, trigger on: rc $?"; grep -E "^\| qwen3" $OUT/check_on.log | head -4
for i in 1 2; do
  run qwen3_$i 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
  DGJAX_PDL_TRIGGER=on run qwen3_pdl_$i 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
done
for i in 1 2; do
  run llama_$i 70 --preset llama-3.1-8b --concurrency 1
  DGJAX_PDL_TRIGGER=on run llama_pdl_$i 70 --preset llama-3.1-8b --concurrency 1
done
grep -h "ms busy per tick" $OUT/*/*.md | sed 's/.*steady ticks, //'
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
