# Prepared in session 26 (not yet run): qwen3-30b-a3b bf16 with --quantize bf12 (experts included since
# session 26: the MoE decode kernel reads bf12 experts, launches not yet swept) against plain bf16, C1 and C4,
# interleaved. bf12 is lossless: greedy tokens through the reference are bf16's; through the kernels they may
# part late (another summation order).
source benchmarks/campaign_lib.sh
# the kernels alone first: bf12 vs bf16 experts at the engine's one- and four-stream widths, a launch sweep at 2
timeout 200 python3 -m benchmarks.moe_kernel_check --preset qwen3-30b-a3b --formats bf16,bf12 --tokens 2,4 \
  --sweep --sweep-tokens 2 > $OUT/moe_check.log 2>&1; tail -8 $OUT/moe_check.log
qb() { XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run $1 ${2:-110} --preset qwen3-30b-a3b "${@:3}"; show_tick $1; }
qb qb12_c1 110 --quantize bf12 --concurrency 1
qb qb16_c1 100 --concurrency 1
qb qb12_c4 110 --quantize bf12 --concurrency 4
qb qb16_c4 100 --concurrency 4
for n in qb12_c1 qb16_c1 qb12_c4 qb16_c4; do
  echo "== $n experts"; grep -hE "^\| \`moe_" $OUT/$n/*.md | cut -d'|' -f2-4
done
cd $OUT && tar czf runs.tgz *.log */*.md && rm -rf */ *.log
