# Session 11 (~7 min): 1) the grid-barrier probe with the next phase's first weight tiles read into L2 before it
# starts (s11b: one launch around a barrier, 25.1 µs a pair, cost what two launches did, 24.7: the ramp and the
# tail are paid either way; reading the next weights while a phase drains is what could hide them, across a
# launch boundary as well as a barrier). 2) glm-4.5-air fp8 C1 with the in-kernel expert selection
# (DGJAX_MOE_ROUTING=kernel) against XLA's, interleaved twice (s11c, one pair: device 6.11 vs 6.23 ms a tick);
# then one pair on qwen3-30b-a3b fp8 if time is left (session 8: even).
BUDGET_S=${BUDGET_S:-440}
source benchmarks/campaign_lib.sh
timeout 120 python3 -m benchmarks.grid_barrier_probe --out $OUT > $OUT/barrier.log 2>&1
echo "== barrier probe rc $? ($SECONDS s)"; grep "^|" $OUT/barrier.log
for i in 1 2; do
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_$i 100 --preset glm-4.5-air --quantize fp8 --concurrency 1
  DGJAX_MOE_ROUTING=kernel XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_routing_kernel_$i 100 --preset glm-4.5-air \
      --quantize fp8 --concurrency 1
done
run qwen3 80 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
DGJAX_MOE_ROUTING=kernel run qwen3_routing_kernel 80 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
