# Session 22 (~3 min): does XLA launch a Pallas Mosaic-GPU kernel early (programmatic dependent launch) inside a
# CUDA graph and leave griddepcontrol.wait to the kernel? (benchmarks/mgpu_pdl_probe.py). If yes, a weight
# kernel written for Mosaic GPU could issue its weight loads before it waits for its predecessor's output,
# which no Pallas-Triton kernel can (XLA's wait at every Triton kernel's entry). Also dumps the HLO and the
# kernels' PTX/SASS names so the launch path is on record.
BUDGET_S=${BUDGET_S:-240}
source benchmarks/campaign_lib.sh
XLA_FLAGS="${XLA_FLAGS:-} --xla_dump_to=$OUT/dump --xla_dump_hlo_as_text" timeout $((BUDGET_S - 20)) \
  python3 -m benchmarks.mgpu_pdl_probe --out $OUT > $OUT/probe.log 2>&1
echo "== probe rc $?"; tail -12 $OUT/probe.log | cut -c1-400
ls $OUT/dump | head -40 > $OUT/dump_files.txt; grep -l "mosaic_gpu" $OUT/dump/*after_optimizations*.txt | head -3
for f in $(grep -l "mosaic_gpu" $OUT/dump/*after_optimizations.txt | head -2); do grep -n "command_buffer\|custom-call\|mosaic" $f | cut -c1-300 | head -12; done
tar czf $OUT/dump.tgz -C $OUT dump && rm -rf $OUT/dump
