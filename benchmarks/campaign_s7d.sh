# Session 7 (~5 min): which part of session 6's parameter packing made qwen3-30b-a3b's compile 45-53 s -> 83-96 s
# on the H200 (glm-4.5-air and llama-3.1-8b unchanged): compile times with the packing as shipped, without the
# q/k head-norm stacks, and without any packing (benchmarks/compile_time.py).
timeout 420 python3 -m benchmarks.compile_time --preset qwen3-30b-a3b --chunk 2048 2>&1 | tee $OUT/compile.log | grep -v Warn
