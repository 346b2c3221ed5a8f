# Prepared in session 8 (~9.5 min; no GPU was lent that session). Times session 8's launch cuts, all made and
# counted without a GPU (benchmarks/deviceless_hlo.py, H200 target: qwen3-30b-a3b fp8 17 -> 13 launches per
# layer before the GPU's router dot): the layer's page offset read inside the fused decode attention (two index
# fusions per layer gone), the MoE down stage finishing the split gate/up partials (DGJAX_MOE_FUSE), the residual
# add + RMSNorm kernel fed the o projection's split-K partials (DGJAX_ADD_NORM), and the routing's ids and
# values in one reduction (no gather, no clamp); and the rank routing kernel, opt-in (DGJAX_MOE_ROUTING=kernel:
# three launches per layer -> one). Each A/B against its switch in the same run; compare with
# s7c/s7e (qwen3 fp8 315.0 / 313.3 tok/s, device 2.95 ms per tick) and with s8a/s8b if they ran first.
python3 -m pip install --no-deps -q llguidance-*.whl
END=$((SECONDS + 570))
B="--contexts 1024 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
run() { name=$1; t=$2; shift 2; left=$((END - SECONDS)); [ $left -lt 60 ] && { echo "== $name skipped"; return; }
        [ $t -gt $left ] && t=$left
        timeout $t python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
        echo "== $name ($SECONDS s)"; grep -hE "^\| 1024|Error" $OUT/$name/*.md $OUT/$name.log | head -3 | cut -d'|' -f2-9,12-16; }
Q="--preset qwen3-30b-a3b --quantize fp8 --concurrency 1"
run qwen3_fp8 120 $Q
DGJAX_ADD_NORM=ref run qwen3_fp8_no_add_norm 100 $Q
DGJAX_MOE_FUSE=none run qwen3_fp8_no_moe_fuse 100 $Q
DGJAX_MOE_ROUTING=kernel run qwen3_fp8_routing_kernel 100 $Q
XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run glm 130 --preset glm-4.5-air --quantize fp8 --concurrency 1
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
