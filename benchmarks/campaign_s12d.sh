# Prepared in session 11 for session 12 (~2 min; pair it with s12a in one call): the megakernel premise on the
# grid-barrier probe. s11b/s11i: one launch around a grid barrier cost what two launches did (23.8 vs 23.9 µs a
# pair), and reading the next phase's first tiles into L2 before the barrier did not help. Here each program
# loads its whole slice of the second weight into registers before the first phase and uses it after the
# barrier ("fused, w2 held in registers", 8 warps), so only the activations wait. 256 programs: 8 rows (64 KB)
# a program, two an SM; 128: 16 rows (128 KB), one an SM. A spin-limit hit means the grid was not all
# resident (registers): that row is void. If the held case beats split clearly, a layer built as one launch
# with weights loaded ahead of their inputs is worth building; if not, the launch structure stays.
BUDGET_S=${BUDGET_S:-200}
source benchmarks/campaign_lib.sh
for pr in 256 128; do
  timeout 90 python3 -m benchmarks.grid_barrier_probe --programs $pr --hold --prefetch "" > $OUT/hold_$pr.log 2>&1
  echo "== $pr programs rc $?"; grep "^|" $OUT/hold_$pr.log
done
