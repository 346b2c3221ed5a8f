# Session 24 (~8 min): the residual add + norm after attention as one kernel (DGJAX_ADD_NORM=kernel: o's 16 split
# partials summed in it) with more warps a program (DGJAX_ADD_NORM_WARPS), against XLA's two launches (a loop add
# fusion + a Triton norm fusion, ~3.3 µs a layer). s8a had the kernel at 4 warps: 5.1 µs a layer. qwen3-30b-a3b fp8
# C1, interleaved; `kern` prints each run's add/norm kernels' µs a tick.
source benchmarks/campaign_lib.sh
kern() { grep -hE "^\| \`(add_rms_norm|loop_add_fusion|fusion)\`" $OUT/$1/*.md | head -3; }
q q_base 140; kern q_base
DGJAX_ADD_NORM=kernel DGJAX_ADD_NORM_WARPS=16 q q_w16; kern q_w16
DGJAX_ADD_NORM=kernel DGJAX_ADD_NORM_WARPS=32 q q_w32; kern q_w32
DGJAX_ADD_NORM=kernel q q_w4; kern q_w4
q q_base2; kern q_base2
DGJAX_ADD_NORM=kernel DGJAX_ADD_NORM_WARPS=16 q q_w16b; kern q_w16b
