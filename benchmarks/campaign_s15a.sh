# Prepared in session 14 for session 15 (~9 min): DGJAX_GRAPH_SCHEDULING=concurrent (XLA builds each decode
# step's CUDA graph from buffer dependencies, so independent kernels overlap; dgjax/runtime/graph_scheduling.py).
# s14e (XLA_FLAGS form): glm-4.5-air fp8 C1 170.7 / 170.7 against 167.9 / 159.9; one qwen3 pair lost (334.7 vs
# 363.6, the concurrent run in the slow mode). Here through the engine's compile option, interleaved, and each
# run prints its greedy-token fingerprint: runs of one preset must all agree (same seed, same prompts), or the
# concurrent graph changed results (`python -m benchmarks.greedy_diff` on the JSONs says where). Default-against-
# default agreement shows the fingerprint is stable at all. glm runs "auto" (the would-be default: concurrent there).
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
show() { grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'; grep -h "^Greedy tokens" $OUT/$1/*.md; }
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
for i in 1 2; do
  run glm_$i 120 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_$i
  DGJAX_GRAPH_SCHEDULING=auto run glm_cc_$i 100 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_cc_$i
done
unset XLA_PYTHON_CLIENT_MEM_FRACTION
for i in 1 2; do
  run qwen3_$i 90 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show qwen3_$i
  DGJAX_GRAPH_SCHEDULING=concurrent run qwen3_cc_$i 70 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1
  show qwen3_cc_$i
done
run llama_1 60 --preset llama-3.1-8b --concurrency 1; show llama_1
DGJAX_GRAPH_SCHEDULING=concurrent run llama_cc_1 60 --preset llama-3.1-8b --concurrency 1; show llama_cc_1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
