# Session 23 (~5 min): the decode attention's launch at the one-stream bucket (width 2, one padding row), 1K
# context, 2064-token tables (decode_bench's), for the MoE presets' heads and llama's: split count, keys a step and
# warps. In the engine (s23b) qwen3-30b-a3b's attention + split merge took 7.0 + 2.3 µs a layer for ~2 MB of K/V.
python3 -m pip install --no-deps -q llguidance-*.whl
timeout ${BUDGET_S:-300} python3 -m benchmarks.fused_decode_check --shapes qwen3-30b-a3b,glm-4.5-air,llama-3.1-8b \
  --batches 1 --contexts 1024 --padding-row --max-len 2064 --splits 0,8,16 --block-tokens 0,128 --warps 0,2 \
  > $OUT/attention_sweep.log 2>&1
echo "rc $?"; grep "^|" $OUT/attention_sweep.log
