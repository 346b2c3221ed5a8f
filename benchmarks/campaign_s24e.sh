# Session 24 (~8 min): the next layer's q/k/v and o weights read into L2 beside this layer's feed-forward
# (DGJAX_L2_PREFETCH=attention; needs DGJAX_GRAPH_SCHEDULING=concurrent to overlap), qwen3-30b-a3b fp8 C1, against
# concurrent scheduling alone and the default, interleaved. `kern` prints the q/k/v (s8) and o (s16) GEMVs and the
# prefetch kernels' µs a tick.
source benchmarks/campaign_lib.sh
kern() { grep -hE "^\| \`(quant_gemv_fp8_r2_bn128_bk128_s(8|16)_w4_st3|l2_prefetch_p132)\`" $OUT/$1/*.md | head -3; }
DGJAX_GRAPH_SCHEDULING=concurrent DGJAX_L2_PREFETCH=attention q q_pre 140; kern q_pre
DGJAX_GRAPH_SCHEDULING=concurrent q q_conc; kern q_conc
q q_base; kern q_base
DGJAX_GRAPH_SCHEDULING=concurrent DGJAX_L2_PREFETCH=attention q q_pre2; kern q_pre2
DGJAX_GRAPH_SCHEDULING=concurrent q q_conc2; kern q_conc2
q q_base2; kern q_base2
cd $OUT && tar czf runs.tgz */*.md && rm -rf */
