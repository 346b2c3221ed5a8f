# Session 24 (~3 min): limits_probe's projection ladders with each chain's kernel mix from the trace (s24b's XLA bf16
# ladder read 2.1 TB/s at 4096 x 28672 where llama's engine gate/up reads ~4 TB/s: which kernels run), read ceilings
# at decode_bench's aligned size (s24a/b used 8.6e9 bytes: 1049804-column rows).
source benchmarks/campaign_lib.sh
timeout 400 python3 -m benchmarks.limits_probe --sections bf16,fp8 --out $OUT/limits --budget-s 300 > $OUT/limits.log 2>&1
echo "== limits rc $? ($SECONDS s)"; grep -E "^\||^#|^- " $OUT/limits.log | grep -v -- "---"
