# Session 8, call 2 (~9 min), after s8a. s8a found session 7-8's defaults slower than s7e (qwen3 fp8 C1 device
# 3.69 vs 2.95 ms per tick). The causes:
# - the qkv GEMV's fused norm prologue: 792 vs 325 µs;
# - the MoE down stage finishing split gate/up: 800 vs 473 µs;
# - the add + norm kernel: 246 µs, against ~160 µs for XLA's fusions;
# - the router's gemm: 155 vs 87 µs, cause unknown.
# The code now defaults DGJAX_MOE_FUSE=none and DGJAX_ADD_NORM=ref (auto = ref). This call picks the quantized
# GEMV fusions (splits only / none / late norm), A/Bs the routing's padding rule (DGJAX_ROUTING_PAD=ids: the
# old ids select) and the routing kernel, repeats FlatCall's A/B (s8a's runs differed by 6% at equal device
# time), and runs glm.
BUDGET_S=560
source benchmarks/campaign_lib.sh
Q="--preset qwen3-30b-a3b --quantize fp8 --concurrency 1"
DGJAX_QUANT_GEMV_FUSE=splits run q_splits 120 $Q
DGJAX_QUANT_GEMV_FUSE=none run q_fuse_none 90 $Q
DGJAX_QUANT_GEMV_FUSE=all DGJAX_QUANT_GEMV_NORM=late run q_late 90 $Q
DGJAX_QUANT_GEMV_FUSE=splits DGJAX_ROUTING_PAD=ids run q_splits_padids 90 $Q
DGJAX_QUANT_GEMV_FUSE=splits DGJAX_MOE_ROUTING=kernel run q_splits_routing_kernel 90 $Q
DGJAX_QUANT_GEMV_FUSE=splits DGJAX_FLAT_CALL=0 run q_splits_noflat 90 $Q
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 DGJAX_QUANT_GEMV_FUSE=splits run glm 130 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
