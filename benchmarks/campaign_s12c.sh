# Prepared in session 11 for session 12 (~5 min): llama-3.1-8b C1 with XLA's dots on cuBLAS instead of its
# Triton GEMM fusions (`--xla_gpu_enable_triton_gemm=false`), interleaved twice. Why: the llama tick is 86% XLA
# dots (s11d: gate/up and lm_head `gemm_fusion_dot_general` 2.00 ms a tick at ~95% of the read ceiling, qkv/o/
# down `gemm_fusion_dot` 1.69 ms at ~86%); issue 3's 275 tok/s is 3.64 ms a step. Never timed here: whether
# cuBLAS's skinny kernels stream qkv/o/down closer to the ceiling than the autotuner's Triton pick. Deviceless
# (jax 0.10.2, benchmarks/deviceless_hlo.py --preset llama-3.1-8b): a layer is 13 launches with Triton (qkv, o and
# down split K, each with a reduce or add fusion after it) and 15 with cuBLAS (4 cublasLt matmuls, each fed by
# a pad fusion of the 2 rows; the norms and adds fuse around them).
BUDGET_S=${BUDGET_S:-420}
source benchmarks/campaign_lib.sh
for i in 1 2; do
  run llama_$i 100 --preset llama-3.1-8b --concurrency 1
  XLA_FLAGS=--xla_gpu_enable_triton_gemm=false run llama_cublas_$i 100 --preset llama-3.1-8b --concurrency 1
done
grep -h -A6 "Device time by kernel" $OUT/llama_cublas_1/*.md | tail -4
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
