# Session 11 (~8 min): the decode attention's long-table rule (fused_decode_attention.kernel.default_launch:
# twice the splits and 128-key steps once a split would get >= 384 keys; from s11a's sweep, where 33 splits of
# 128 keys took 17.1 µs a layer at 8K against 24.2 for the old 17 splits of 64). 1) the kernel alone at its new
# defaults, 8K and 1K keys in an 8272-key table, with the C1 bucket's padding row; 2) llama-3.1-8b at 8K context,
# 1 and 4 streams, twice (s11a's old defaults on this GPU: 207.1 and 208.5 tok/s at C1; 33 splits of 64 keys:
# 212.1 and 214.6); 3) issue 3's presets at 1K and 1/4/16 streams (campaign_s11g.sh).
BUDGET_S=570
B="--prefill 2048 --decode-tokens 192 --trace-tokens 8"
source benchmarks/campaign_lib.sh
timeout 100 python3 -m benchmarks.fused_decode_check --shapes llama-3.1-8b --batches 1 --contexts 8192,1024 \
    --padding-row --max-len 8272 > $OUT/attention_defaults.log 2>&1
echo "== kernel ($SECONDS s)"; grep -E "^\| llama" $OUT/attention_defaults.log | cut -d'|' -f3-5,10-12
run llama_8k_1 120 --preset llama-3.1-8b --concurrency 1,4 --contexts 8192
run llama_8k_2 90 --preset llama-3.1-8b --concurrency 1 --contexts 8192
B="--contexts 1024 --prefill 2048 --decode-tokens 192 --trace-tokens 8"
run qwen3_8b 150 --preset qwen3-8b --concurrency 1,4,16
run llama 150 --preset llama-3.1-8b --concurrency 1,4,16
for n in llama_8k_1 llama_8k_2; do grep -h -E "fused_decode|split_merge" $OUT/$n/*.md | head -4; done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
