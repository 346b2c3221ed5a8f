# Prepared in session 10 for session 11 (~2 min): Nsight Compute on glm-4.5-air's fp8 decode kernels (q/k/v, o,
# shared expert, experts, attention), as campaign_s10f.sh did for qwen3-30b-a3b: glm's experts' down stage reads
# at 49% of the ceiling and its big GEMVs at ~70%, where qwen3's ran latency-bound at 6-15% occupancy.
PROBE_ARGS="--preset glm" bash benchmarks/campaign_s10f.sh
