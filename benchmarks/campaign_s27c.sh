# Session 27: bf12 experts after s27a. (1) the MoE decode kernel's new bf12 launch (128-input steps, down in
# 128-column blocks) against bf16 at 2 and 4 tokens; (2) the MoE prefill grouped GEMM at 2048 tokens in bf16,
# nvfp4 and bf12, packed formats reading x split into even/odd halves (new default) or stride-2 gathers (the old
# way, DGJAX_MOE_PREFILL_X=strided): s27a's qwen3 bf12 2K prefill took 0.389 s against bf16's 0.065;
# (3) decode_bench qwen3-30b-a3b --quantize bf12 C1 (decode and 2K prefill end to end).
source benchmarks/campaign_lib.sh
timeout 100 python3 -m benchmarks.moe_kernel_check --preset qwen3-30b-a3b --formats bf16,bf12 --tokens 2,4 \
  > $OUT/moe_check.log 2>&1; grep -E "^\| qwen3" $OUT/moe_check.log
for xl in split strided; do
  DGJAX_MOE_PREFILL_X=$xl timeout 150 python3 -m benchmarks.moe_prefill_check --preset qwen3-30b-a3b \
    --formats bf16,nvfp4,bf12 --tokens 2048 > $OUT/prefill_$xl.log 2>&1
  echo "== prefill x $xl ($SECONDS s)"; grep -E "^\| qwen3|Error" $OUT/prefill_$xl.log | cut -d'|' -f2-6,9-10,13-15
done
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run qb12_c1 120 --preset qwen3-30b-a3b --quantize bf12 --concurrency 1
show_tick qb12_c1
grep -hE "^\| \`moe_" $OUT/qb12_c1/*.md | cut -d'|' -f2-4 | head -4
cd $OUT && tar czf runs.tgz *.log */*.md 2>/dev/null; rm -rf */ *.log
