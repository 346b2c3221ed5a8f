# Session 8, GPU call 1 (~4.5 min; results benchmarks/results/2026-12-01-s8a-*). Sessions 7 and 8 had changed
# the decode tick without timing it. This call timed the defaults of the time on qwen3-30b-a3b fp8 C1, and
# A/B'd FlatCall (DGJAX_FLAT_CALL=0), the add + norm kernel (DGJAX_ADD_NORM=ref) and the MoE down stage's
# split finish (DGJAX_MOE_FUSE=none). It found those defaults slower than s7e: 256 tok/s, device 3.69 ms per
# tick. That led to campaign_s8d.sh.
BUDGET_S=570
source benchmarks/campaign_lib.sh
Q="--preset qwen3-30b-a3b --quantize fp8 --concurrency 1"
for v in 1 0; do
  DGJAX_FLAT_CALL=$v timeout 100 python3 -m benchmarks.host_overhead --preset qwen3-30b-a3b --quantize fp8 \
      --label "DGJAX_FLAT_CALL=$v" >> $OUT/overhead.log 2>&1
done
grep -E "ms/tick|Error" $OUT/overhead.log
run qwen3_fp8 130 $Q
DGJAX_FLAT_CALL=0 run qwen3_fp8_noflat 100 $Q
DGJAX_ADD_NORM=ref run qwen3_fp8_no_add_norm 100 $Q
DGJAX_MOE_FUSE=none run qwen3_fp8_no_moe_fuse 100 $Q
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
