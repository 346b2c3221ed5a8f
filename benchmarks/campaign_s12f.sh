# Session 12 (~6 min): 1) qwen3-30b-a3b fp8 C1 with its 6-step down in 2 K splits (DGJAX_MOE_DOWN_SPLITS=2)
# against unsplit, interleaved twice. s9f's single pair said unsplit (356.8 vs 336.0 tok/s) although the split
# kernels took 80 µs a tick less, and single runs of identical code have since varied 330-364 (s11); glm's
# 11-step down won split in the engine (s12b), so the 6-step one is asked again. 2) The 8K attention at 4 rows:
# s12a had 9 splits of 128-key steps at 38.2 µs against the default's 18 at 42.4, a single sweep; here twice.
BUDGET_S=${BUDGET_S:-540}
source benchmarks/campaign_lib.sh
for i in 1 2; do
  run qwen3_$i 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
  DGJAX_MOE_DOWN_SPLITS=2 run qwen3_down2_$i 100 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
done
grep -h "moe_down" $OUT/qwen3_1/*.md $OUT/qwen3_down2_1/*.md | head -4
for i in 1 2; do
  timeout 60 python3 -m benchmarks.fused_decode_check --shapes llama-3.1-8b --contexts 8192 --max-len 8400 \
      --batches 4 --splits 0,9,18 --block-tokens 0,64 > $OUT/c4_$i.log 2>&1
  echo "== c4 8K attention $i"; grep -E "^\| llama" $OUT/c4_$i.log | cut -d'|' -f3-5,10-12
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
