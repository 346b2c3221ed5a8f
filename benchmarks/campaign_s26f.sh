# Session 26 (~3.5 min): qwen3-30b-a3b bf16 C4 and C1 with this session's defaults (merge kernel at every width,
# one attention program an SM at 4+ rows); its last C4 record is session 8's.
source benchmarks/campaign_lib.sh
run qb4 110 --preset qwen3-30b-a3b --concurrency 4; show_tick qb4
run qb1 100 --preset qwen3-30b-a3b --concurrency 1; show_tick qb1
cd $OUT && tar czf runs.tgz *.log */*.md && rm -rf */ *.log
