# Session 3, call 2 (2026-12-01): the MoE engine after the padding-row fix and with the prefill grouped GEMM
# on by default; a device trace with the decode module's fusions; the fp8 presets of issue 4.
set -x
L=$OUT/campaign.log
timeout 140 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --contexts 1024 --concurrency 1,4 \
    --prefill 2048 --decode-tokens 64 --out $OUT > $L 2>&1
timeout 110 python3 -m benchmarks.profile_decode --preset qwen3-30b-a3b --concurrency 1 --ticks 10 --top 40 \
    --hlo-dump --out $OUT/prof >> $L 2>&1
timeout 120 python3 -m benchmarks.decode_bench --preset qwen3-30b-a3b --quantize fp8 --contexts 1024 --concurrency 1 \
    --prefill 2048 --decode-tokens 64 --out $OUT >> $L 2>&1
timeout 170 python3 -m benchmarks.decode_bench --preset glm-4.5-air --quantize fp8 --contexts 1024 --concurrency 1 \
    --prefill 2048 --decode-tokens 64 --out $OUT >> $L 2>&1
grep -E "^\| 1024|^\| 2048|ceiling \(this|load \+ compile|Error|error" $L | cut -c1-250
