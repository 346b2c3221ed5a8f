# Shared by the campaign scripts (sourced from the repository root on the device machine):
# installs the carried llguidance wheel, then `run NAME TIMEOUT DECODE_BENCH_ARGS...` runs decode_bench into
# $OUT/NAME and prints its decode rows, unless fewer than 45 s remain before the call's own deadline
# (BUDGET_S seconds after sourcing, default 560: a call may run 600). B holds the common decode_bench
# arguments; a script may set it before sourcing.
python3 -m pip install --no-deps -q llguidance-*.whl
END=$((SECONDS + ${BUDGET_S:-560}))
B=${B:-"--contexts 1024 --prefill 2048 --decode-tokens 192 --trace-tokens 8"}  # 192: ~0.55 s windows (s10: 64 varied 5-8%)
run() {
  local name=$1 t=$2 left; shift 2
  left=$((END - SECONDS))
  [ $left -lt 45 ] && { echo "== $name skipped"; return; }
  [ $t -gt $left ] && t=$left
  timeout $t python3 -m benchmarks.decode_bench "$@" $B --out $OUT/$name > $OUT/$name.log 2>&1
  echo "== $name ($SECONDS s)"
  grep -hE "^\| [0-9]+ \||Error" $OUT/$name/*.md $OUT/$name.log | head -4 | cut -d'|' -f2-9,12-19
}
# `show_tick NAME`: a run's busy time a tick, greedy fingerprint, Pallas launch edges and, where the run logged
# XLA's command-buffer updates (TF_CPP_VMODULE=command_buffer_thunk=3), how often its graphs were re-recorded.
show_tick() {
  grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'; grep -h "^Greedy tokens" $OUT/$1/*.md
  grep -h '^| pallas>pallas' $OUT/$1/*.md; grep -h '^CUDA graphs XLA re-recorded' $OUT/$1/*.md | cut -c1-220
  grep -q "command_buffer_thunk" $OUT/$1.log 2>/dev/null && python3 -m benchmarks.graph_updates $OUT/$1.log
}
# `q NAME [TIMEOUT]` / `g NAME [TIMEOUT]`: qwen3-30b-a3b / glm-4.5-air fp8 C1 (the MoE A/B staples) with show_tick.
# Scripts that define their own q / g (sessions up to 22) replace these.
q() { run $1 ${2:-90} --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show_tick $1; }
g() { XLA_PYTHON_CLIENT_MEM_FRACTION=0.95 run $1 ${2:-110} --preset glm-4.5-air --quantize fp8 --concurrency 1; show_tick $1; }
