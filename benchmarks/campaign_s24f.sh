# Session 24 (~6 min): the decode attention with each program's first key block (table + K/V loads) issued before
# q's norm and rope use q's loads (DGJAX_ATTENTION_EARLY_KEYS=on), against the loop's order: the kernel alone
# (fused_decode_check, the C1 bucket's padding row and 2064-token table), then qwen3-30b-a3b fp8 and llama-3.1-8b C1.
source benchmarks/campaign_lib.sh
att() { grep -hE "^\| \`(fused_decode_attention|split_merge)" $OUT/$1/*.md | head -2; }
for e in off on; do
  DGJAX_ATTENTION_EARLY_KEYS=$e timeout 150 python3 -m benchmarks.fused_decode_check --batches 1 --contexts 1024 \
    --padding-row --max-len 2064 --shapes qwen3-30b-a3b,llama-3.1-8b,glm-4.5-air > $OUT/check_$e.log 2>&1
  echo "== check early_keys=$e rc $? ($SECONDS s)"; grep "^|" $OUT/check_$e.log
done
DGJAX_ATTENTION_EARLY_KEYS=on q q_on; att q_on
q q_off; att q_off
DGJAX_ATTENTION_EARLY_KEYS=on run l_on 100 --preset llama-3.1-8b --concurrency 1; show_tick l_on; att l_on
run l_off 100 --preset llama-3.1-8b --concurrency 1; show_tick l_off; att l_off
cd $OUT && tar czf runs.tgz */*.md && rm -rf */
