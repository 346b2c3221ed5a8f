# Prepared in session 9 for session 10 (~9 min): the wide fp8 defaults (quantized GEMV 128-column blocks;
# MoE experts at 1-2 tokens 128-column blocks, gate/up split to one program per SM, down unsplit) against
# both off, interleaved (off, on, off, on) so that the order of runs in a call cannot pose as the effect: in
# session 9 the first engine run of a call was the slow one in 3 of 4 calls, and s9f's only qwen3 A/B put the
# wide run first (336.0 vs 356.8 tok/s on 80 µs less device time). Decide by tok/s over both pairs, with
# device ms/tick as the check. The result files now name the switches (`- environment:`) and the SM clock
# before and after each window, which now follows 1 s of device work (decode_bench --warm-s).
# Also in both glm arms: the shared expert's down projection (K = 11 x 128) now splits K unevenly in 4
# (`quant_gemv_fp8_r2_bn64_bk128_s4_*`, 256 programs); in session 8-9 it ran unsplit (`..._s1_*`, 64
# programs, ~8.3 µs a layer, 373 µs a tick): compare its row in the kernel tables.
# Session 10: 192 decode tokens (a ~0.6 s steady window instead of ~0.15 s), since runs of one config varied
# 5-8% between calls.
BUDGET_S=570
B="--contexts 1024 --prefill 2048 --decode-tokens 192 --trace-tokens 8"
source benchmarks/campaign_lib.sh
for i in 1 2; do
  DGJAX_QUANT_GEMV_WIDE=off DGJAX_MOE_FP8_WIDE=off run qwen3_off_$i 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
  run qwen3_on_$i 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
done
DGJAX_QUANT_GEMV_WIDE=off DGJAX_MOE_FP8_WIDE=off XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_off 110 --preset glm-4.5-air --quantize fp8 --concurrency 1
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_on 110 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ 2>/dev/null && rm -rf */)
