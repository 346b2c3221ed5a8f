# Session 3, call 1 (2026-12-01): validate the two kernels that have only run in interpret mode, then a
# device trace of qwen3-30b-a3b single-stream decode to see where the MoE step's time goes.
set -x
L=$OUT/campaign.log
timeout 150 python3 -m benchmarks.quant_gemv_check --budget-s 100 > $L 2>&1
timeout 150 python3 -m benchmarks.moe_prefill_check >> $L 2>&1
timeout 200 python3 -m benchmarks.profile_decode --preset qwen3-30b-a3b --concurrency 1 --ticks 10 --top 45 \
    --hlo-dump --out $OUT/prof >> $L 2>&1
tail -c 6000 $L
