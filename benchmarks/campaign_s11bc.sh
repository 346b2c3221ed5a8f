# Prepared in session 10 for session 11: campaign_s11b.sh (grid-barrier probe, ~1.5 min) and campaign_s11c.sh
# (glm experts with the down stage split unevenly, ~2.5 min) in one device call, to pay the machine's start once
# (read those two for the why), then glm-4.5-air C1 with the one-kernel expert selection (DGJAX_MOE_ROUTING=kernel)
# against XLA's: glm's sigmoid routing is 5 XLA launches a layer after the router dot (deviceless, session 10:
# or, two reductions, select, normalize), where qwen3's softmax routing is 3 (the kernel matched those in device
# time in session 8, s8d, and was left opt-in).
bash benchmarks/campaign_s11b.sh
bash benchmarks/campaign_s11c.sh
BUDGET_S=$((580 - SECONDS))
source benchmarks/campaign_lib.sh
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm 120 --preset glm-4.5-air --quantize fp8 --concurrency 1
DGJAX_MOE_ROUTING=kernel XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm_routing_kernel 120 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
