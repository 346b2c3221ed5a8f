# Session 4, call 4: Pallas skinny GEMV vs XLA's dot at the decode projection shapes (qwen3-30b-a3b's qkv runs
# at 2.1 TB/s through XLA: 40 column blocks for 132 SMs).
L=$OUT/campaign.log
timeout 420 python3 -m benchmarks.gemv_kernel_sweep --rows 2 --shapes moe_qkv moe_o router qkv o gate_up down \
    --block-n 32 64 128 --block-k 128 256 --splits 1 2 4 8 --stages 3 --budget-s 330 --out $OUT > $L 2>&1
tail -40 $L
