# Prepared in session 10 for session 11 (~8 min): the decode attention at long context. At 8K keys the fused
# kernel took 22.4 µs a layer in the llama-3.1-8b C1 engine (s8h: 717.5 µs a tick, 1.5 TB/s on 33.5 MB of K/V a
# layer, 15% of the tick; issue 3's "C1 at 8K >= 250 tok/s" is at 207.6). The engine's width-2 bucket carries
# an idle padding row, so the split rule (two programs an SM) gives 17 splits of 8 blocks each to 136 working
# programs. Sweep split count x pipeline depth x keys per step with that padding row, at 8K and 1K, then the
# engine at 8K with the split rule aimed at 4 programs an SM (DGJAX_ATTENTION_PROGRAMS=528: 33 splits) and
# without, interleaved.
BUDGET_S=560
B="--prefill 2048 --decode-tokens 192 --trace-tokens 8"
source benchmarks/campaign_lib.sh
timeout 200 python3 -m benchmarks.fused_decode_check --shapes llama-3.1-8b --batches 1 --contexts 8192,1024 \
    --padding-row --max-len 8272 --splits 0,33,66 --stages 0,3,4 --block-tokens 0,128 > $OUT/attention_sweep.log 2>&1
echo "== sweep ($SECONDS s)"; grep -E "^\| llama" $OUT/attention_sweep.log | cut -d'|' -f3-5,10-12
run llama_8k 120 --preset llama-3.1-8b --concurrency 1 --contexts 8192
DGJAX_ATTENTION_PROGRAMS=528 run llama_8k_p528 120 --preset llama-3.1-8b --concurrency 1 --contexts 8192
run llama_8k_2 120 --preset llama-3.1-8b --concurrency 1 --contexts 8192
DGJAX_ATTENTION_PROGRAMS=528 run llama_8k_p528_2 120 --preset llama-3.1-8b --concurrency 1 --contexts 8192
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
