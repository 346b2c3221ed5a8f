# Prepared in session 10 for session 11 (~7 min): how much Programmatic Dependent Launch gives the decode tick
# now, and where the GPU's XLA puts its instructions. XLA launches every kernel with PDL by default and (jax
# 0.10.2, deviceless) inserts griddepcontrol.wait at each kernel's entry, Pallas kernels included, with no early
# trigger: CTAs may be scheduled while the predecessor drains, but nothing loads before it ends. If turning it
# off costs much, the launch floor is partly a scheduling cost that moving waits after the weight loads (XLA or
# a Pallas-side switch) could hide further. 1) the census on this machine's jax; 2) qwen3 fp8 C1 with PDL
# off and on, interleaved.
BUDGET_S=560
source benchmarks/campaign_lib.sh
timeout 120 python3 -m benchmarks.pdl_census --out $OUT > $OUT/census.log 2>&1; echo "== census rc $?"; cat $OUT/census.log | head -12
for i in 1 2; do
  XLA_FLAGS=--xla_gpu_enable_pdl=false run qwen3_nopdl_$i 120 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
  run qwen3_pdl_$i 120 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
