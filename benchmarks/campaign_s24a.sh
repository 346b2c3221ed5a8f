# Session 24 (~8 min): the limits model (benchmarks/limits_probe.py: read ceiling several ways, the floor of a
# dependent kernel boundary in one CUDA graph, projection time as a + bytes / b for XLA bf16 and the fp8 GEMV, PDL
# off/on), then llama-3.1-8b and qwen3-30b-a3b fp8 C1 engine runs on the same machine for the model to be checked on.
source benchmarks/campaign_lib.sh
timeout 330 python3 -m benchmarks.limits_probe --out $OUT/limits --budget-s 240 > $OUT/limits.log 2>&1
echo "== limits rc $? ($SECONDS s)"; grep -E "^\||^#" $OUT/limits.log | grep -v -- "---"
run l_base 100 --preset llama-3.1-8b --concurrency 1; show_tick l_base
q q_base 110
