# Session 14 (~6 min): XLA's command-buffer scheduling mode. By default (LHS) the CUDA graph of a decode step
# runs its kernels in the latency-hiding scheduler's stream order, one after another on one stream here;
# CONCURRENT builds the graph from buffer dependencies, so kernels that do not depend on each other may
# overlap: glm-4.5-air's shared expert (3 launches a layer) beside its routed experts, and the routing
# fusions beside the attention in both MoE presets. These kernels are latency-bound (ncu, s10f: 6-15%
# occupancy), so overlapping them could hide part of them. Interleaved pairs, default first.
BUDGET_S=${BUDGET_S:-360}
source benchmarks/campaign_lib.sh
show() { grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'
         grep -h -A8 "Launch edges" $OUT/$1/*.md | grep '^| [a-z]*>' ; }
CC=--xla_gpu_command_buffer_scheduling_mode=CONCURRENT
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
run glm_1 120 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_1
XLA_FLAGS=$CC run glm_cc_1 100 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_cc_1
unset XLA_PYTHON_CLIENT_MEM_FRACTION
run qwen3_1 90 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show qwen3_1
XLA_FLAGS=$CC run qwen3_cc_1 70 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show qwen3_cc_1
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.95
run glm_2 70 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_2
XLA_FLAGS=$CC run glm_cc_2 70 --preset glm-4.5-air --quantize fp8 --concurrency 1; show glm_cc_2
unset XLA_PYTHON_CLIENT_MEM_FRACTION
run llama_1 60 --preset llama-3.1-8b --concurrency 1; show llama_1
XLA_FLAGS=$CC run llama_cc_1 60 --preset llama-3.1-8b --concurrency 1; show llama_cc_1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
