# Session 27: the MoE prefill grouped GEMM's launches for bf12 and nvfp4 experts (qwen3-30b-a3b, 2048 tokens):
# in s27c both ran ~3x bf16's 0.855 ms a layer (bf12 2.72, nvfp4 2.86) at the launches tuned for bf16.
python3 -m pip install --no-deps -q llguidance-*.whl
timeout ${BUDGET_S:-420} python3 -m benchmarks.moe_prefill_check --preset qwen3-30b-a3b --formats bf12,nvfp4 \
  --tokens 2048 --sweep > $OUT/prefill_sweep.log 2>&1
grep -E "best|default|Error" $OUT/prefill_sweep.log | head; grep -E "^\| qwen3" $OUT/prefill_sweep.log | cut -d'|' -f2-6
sort -t: -k2 -n $OUT/prefill_sweep.log | grep "ms/layer" | head -0
grep "ms/layer" $OUT/prefill_sweep.log | sort -k2 -t: | head -60
cd $OUT && tar czf runs.tgz *.log; rm -f *.log
