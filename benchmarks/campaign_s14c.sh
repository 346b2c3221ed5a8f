# Prepared in session 13 for session 14 (~6 min): XLA's split-K GEMMs on llama-3.1-8b decode. At one row XLA
# splits K of every dense projection and sums the partials in a second kernel (fused with the residual add or
# the SiLU): 13 launches a layer in a deviceless H200 compile (jax 0.10.2), 11 with
# XLA_FLAGS=--xla_gpu_experimental_force_split_k=1 (the qkv and o/down reductions go; the two residual adds
# merge). Fewer launches only pay if the unsplit GEMMs still stream at the read ceiling: C1 and C16, default
# against forced split_k=1, interleaved. (Deviceless listings: benchmarks/results/2026-12-02-s13-split-k-deviceless.md.)
# qwen3-30b-a3b fp8 too: its router dot is split the same way (deviceless: 20 launches a layer, 19 forced).
BUDGET_S=${BUDGET_S:-540}
source benchmarks/campaign_lib.sh
show() { grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'
         grep -h -A14 "^| kernel | µs/tick" $OUT/$1/*.md | grep '^| `' | head -6; }
SK=--xla_gpu_experimental_force_split_k=1
for i in 1 2; do
  run c1_$i 80 --preset llama-3.1-8b --concurrency 1; show c1_$i
  XLA_FLAGS=$SK run c1_sk1_$i 80 --preset llama-3.1-8b --concurrency 1; show c1_sk1_$i
done
run c16_1 80 --preset llama-3.1-8b --concurrency 16
XLA_FLAGS=$SK run c16_sk1_1 80 --preset llama-3.1-8b --concurrency 16
for i in 1 2; do
  run q_$i 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show q_$i
  XLA_FLAGS=$SK run q_sk1_$i 110 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show q_sk1_$i
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
