# Next GPU session, call 1 of 3 (~9.5 min; rewritten in session 8, which was lent no GPU; none of s8a-c has run).
# Sessions 7 and 8 changed the decode tick without timing it. This call times the defaults and A/Bs the
# changes on qwen3-30b-a3b fp8 C1:
# - FlatCall (session 7; DGJAX_FLAT_CALL=0 undoes it), first on the host-bound tiny-width tick;
# - session 8's residual add + norm kernel (DGJAX_ADD_NORM=ref undoes it);
# - the MoE down stage finishing split gate/up (DGJAX_MOE_FUSE=none undoes it).
# The defaults also carry session 7's fused input norm and SplitSums, and session 8's page offset in the
# kernel, single-reduction routing and unsliced split merge. Session 8 counted 12 launches per layer on the
# H200, where s7e had ~18 (benchmarks/results/2026-12-01-s8-launch-counts-deviceless.md).
# Compare with s7c/s7e: 315.0 / 313.3 tok/s, device 2.95 ms, dispatch 3.20-3.24 ms per tick.
python3 -m pip install --no-deps -q llguidance-*.whl
END=$((SECONDS + 570))
B="--contexts 1024 --prefill 2048 --decode-tokens 64 --trace-tokens 8"
run() { name=$1; t=$2; shift 2; left=$((END - SECONDS)); [ $left -lt 60 ] && { echo "== $name skipped"; return; }
        [ $t -gt $left ] && t=$left
        timeout $t python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
        echo "== $name ($SECONDS s)"; grep -hE "^\| 1024|Error" $OUT/$name/*.md $OUT/$name.log | head -3 | cut -d'|' -f2-9,12-16; }
Q="--preset qwen3-30b-a3b --quantize fp8 --concurrency 1"
for v in 1 0; do
  DGJAX_FLAT_CALL=$v timeout 100 python3 -m benchmarks.host_overhead --preset qwen3-30b-a3b --quantize fp8 \
      --label "DGJAX_FLAT_CALL=$v" >> $OUT/overhead.log 2>&1
done
grep -E "ms/tick|Error" $OUT/overhead.log
run qwen3_fp8 130 $Q
DGJAX_FLAT_CALL=0 run qwen3_fp8_noflat 100 $Q
DGJAX_ADD_NORM=ref run qwen3_fp8_no_add_norm 100 $Q
DGJAX_MOE_FUSE=none run qwen3_fp8_no_moe_fuse 100 $Q
(cd $OUT && tar czf runs.tgz */ && rm -rf */)
