# Session 27: the MoE prefill grouped GEMM with s27d's launch for packed experts (bf12, nvfp4: gate/up 128-input
# steps, 2 stages) at 2048 tokens against bf16; then qwen3-30b-a3b --quantize bf12 C1 end to end (2K prefill).
source benchmarks/campaign_lib.sh
timeout 150 python3 -m benchmarks.moe_prefill_check --preset qwen3-30b-a3b --formats bf16,nvfp4,bf12 --tokens 2048 \
  > $OUT/prefill.log 2>&1
echo "== prefill ($SECONDS s)"; grep -E "^\| qwen3|Error" $OUT/prefill.log | cut -d'|' -f2-6,9-10,13-15
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run qb12_c1 120 --preset qwen3-30b-a3b --quantize bf12 --concurrency 1
show_tick qb12_c1
grep -hE "^\| \`moe_" $OUT/qb12_c1/*.md | cut -d'|' -f2-4 | head -2
cd $OUT && tar czf runs.tgz *.log */*.md 2>/dev/null; rm -rf */ *.log
