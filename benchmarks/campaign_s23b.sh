# Session 23 (~9 min): the selection kernel at one warp (every reduction of its ranking inside the warp) and
# a width-1 decode executable for one stream, against the defaults, in qwen3-30b-a3b / glm-4.5-air fp8 C1.
# First the selection alone (benchmarks/moe_routing_check) at 1, 2 and 4 warps. Kernel rows print the
# selection's launches (moe_select, XLA's reduce fusions) so each arm's router cost shows beside its tok/s.
BUDGET_S=${BUDGET_S:-540}
source benchmarks/campaign_lib.sh
kern() { grep -hE "^\| \`(moe_select|input_reduce_fusion|fusion|gemm_fusion_dot|loop_convert_fusion)\`" $OUT/$1/*.md | cut -c1-100; }
timeout 120 python3 -m benchmarks.moe_routing_check --preset qwen3-30b-a3b --preset glm-4.5-air --tokens 1,2 \
  --warps 1,2,4 > $OUT/routing_check.log 2>&1; echo "== routing check rc $?"; grep "^|" $OUT/routing_check.log
for i in 1 2; do
  q base_$i; kern base_$i
  DGJAX_MOE_ROUTING=kernel DGJAX_MOE_ROUTING_WARPS=1 q rk1_$i; kern rk1_$i
  DGJAX_MIN_DECODE_WIDTH=1 q w1_$i; kern w1_$i
  [ $i = 1 ] && { DGJAX_MOE_ROUTING_WARPS=1 g gw1_1; kern gw1_1; g gbase_1; kern gbase_1; }
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
