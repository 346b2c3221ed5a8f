# Next GPU session, call 2 of 3 (~9.5 min; rewritten in session 8). More A/Bs of qwen3-30b-a3b fp8 C1
# against the defaults of call 1 (campaign_s8a.sh):
# - the opt-in rank routing kernel (DGJAX_MOE_ROUTING=kernel: three routing launches per layer -> one);
# - session 7's quantized GEMV fusions (DGJAX_QUANT_GEMV_FUSE=none: no fused input norm, no SplitSums into the
#   attention). Session 4 saw a bf16 fused-norm prologue lose to XLA, so this may lose too.
# - the fused norm run late (DGJAX_QUANT_GEMV_NORM=late: no prologue; the row scale is summed alongside the
#   weight stream).
# Then glm-4.5-air fp8 with the defaults and with the routing kernel (sigmoid routing: four fusions -> one).
# Compare with s7c: glm 150.3 tok/s.
python3 -m pip install --no-deps -q llguidance-*.whl
END=$((SECONDS + 570))
B="--contexts 1024 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
run() { name=$1; t=$2; shift 2; left=$((END - SECONDS)); [ $left -lt 60 ] && { echo "== $name skipped"; return; }
        [ $t -gt $left ] && t=$left
        timeout $t python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
        echo "== $name ($SECONDS s)"; grep -hE "^\| 1024|Error" $OUT/$name/*.md $OUT/$name.log | head -3 | cut -d'|' -f2-9,12-16; }
Q="--preset qwen3-30b-a3b --quantize fp8 --concurrency 1"
DGJAX_MOE_ROUTING=kernel run qwen3_fp8_routing_kernel 100 $Q
DGJAX_QUANT_GEMV_FUSE=none run qwen3_fp8_gemv_fuse_none 100 $Q
DGJAX_QUANT_GEMV_NORM=late run qwen3_fp8_late_norm 100 $Q
G="--preset glm-4.5-air --quantize fp8 --concurrency 1"
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm 130 $G
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 DGJAX_MOE_ROUTING=kernel run glm_routing_kernel 120 $G
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
