# Session 23 (~9 min): s23c's faster attention launches in the engines (C1, 1K context, 2064-token tables).
# Alone (fused_decode_check, kernel + merge a layer): qwen3-30b-a3b 33 splits of 64-key steps 7.7 µs, 16
# splits 6.4; glm-4.5-air default 8.5, 8 splits of 128-key steps 7.0; llama-3.1-8b 17 of 64 7.9, 8 of 128 7.5.
# DGJAX_ATTENTION_PROGRAMS=128 gives 16 splits at qwen3's 4 KV heads and 8 at glm's / llama's 8 (2 rows).
BUDGET_S=${BUDGET_S:-540}
source benchmarks/campaign_lib.sh
att() { grep -hE "^\| \`(fused_decode_attention|split_merge)" $OUT/$1/*.md | cut -c1-90; }
l() { run $1 ${2:-100} --preset llama-3.1-8b --concurrency 1; show_tick $1; }
q q_base_1; att q_base_1
DGJAX_ATTENTION_PROGRAMS=128 q q_p128_1; att q_p128_1
g g_base_1; att g_base_1
DGJAX_ATTENTION_PROGRAMS=128 DGJAX_ATTENTION_BLOCK_TOKENS=128 g g_s8_1; att g_s8_1
DGJAX_ATTENTION_PROGRAMS=128 q q_p128_2; att q_p128_2
q q_base_2; att q_base_2
DGJAX_ATTENTION_PROGRAMS=128 DGJAX_ATTENTION_BLOCK_TOKENS=128 l l_s8_1; att l_s8_1
l l_base_1; att l_base_1
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
