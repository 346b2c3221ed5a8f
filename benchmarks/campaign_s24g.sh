# Session 24 (~5 min): the default path after this session's changes (the decode attention's key-block loads
# factored into `load_block`, unread `after` operands in quant_gemv) on the presets not run yet this session:
# glm-4.5-air fp8 C1 and qwen3-30b-a3b bf16 C1.
source benchmarks/campaign_lib.sh
g g_base 200
run qb_base 120 --preset qwen3-30b-a3b --concurrency 1; show_tick qb_base
cd $OUT && tar czf runs.tgz */*.md && rm -rf */
