# Prepared in session 20 (~8 min): the slow mode against other device allocators. s20 found the mode drawn by
# where the tick's buffers lie (benchmarks/results/2026-12-03-s20-slow-mode-redraw.md); JAX's BFC pool places
# them the same way in a process's first engine (slow 11 of 12 times). `cuda_async` (cudaMallocAsync's pool)
# places them by another policy; without preallocation the BFC pool grows in pieces. Each arm: one mode_probe
# process of three engines, then qwen3 fp8 C1 through decode_bench twice.
BUDGET_S=${BUDGET_S:-540}
source benchmarks/campaign_lib.sh
arm() {  # arm NAME ENV...: the probe and two engine runs under ENV
  local name=$1; shift
  left=$((END - SECONDS)); [ $left -lt 60 ] && { echo "== $name skipped"; return; }
  env "$@" timeout $((left < 100 ? left : 100)) python3 -m benchmarks.mode_probe --preset qwen3-30b-a3b \
    --quantize fp8 --engines 3 --rounds 1 --direct 100 --out $OUT/$name-rounds.jsonl > $OUT/$name-probe.log 2>&1
  echo "== $name probe rc $? ($SECONDS s)"
  grep -E "^round" $OUT/$name-probe.log | sed -E "s/pid=[0-9]+ //; s/cache=\{[^}]*\} ?//" | cut -c1-160
  for i in 1 2; do (export "$@"; run ${name}_q$i 60 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1); done
}
arm async XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async
arm noprealloc XLA_PYTHON_CLIENT_PREALLOCATE=false
