# Session 15 (~4 min): is qwen3-30b-a3b fp8's slow mode XLA re-recording the decode step's CUDA graph every tick?
# XLA re-records a command buffer (every node) whenever any buffer it captured moved since its last run, e.g. a
# tick's fresh output or temp buffer landing elsewhere than the previous tick's. Slow runs spend ~0.3 ms more
# host time a dispatch and leave the GPU idle 3-9% of a step (s15b/c), which such updates would explain; the
# allocator's placement would explain why a process falls in one mode or the other. XLA logs every update
# (command_buffer_thunk VLOG 3): each run prints its tok/s and edge sign, then per command buffer (by its
# command count) how often it was updated, after how many executions, and how long an update took.
BUDGET_S=${BUDGET_S:-280}
source benchmarks/campaign_lib.sh
show() {
  grep -h "ms busy per tick" $OUT/$1/*.md | sed 's/.*steady ticks, //'; grep -h '^| pallas>pallas' $OUT/$1/*.md
  python3 - $OUT/$1.log <<'PY'
import collections, re, statistics, sys
text = open(sys.argv[1], errors="replace").read()
ups = re.findall(r"Update command buffer on device #\d+ by recoding.*?after (\d+) executions since last update"
                 r"; num_commands=(\d+)", text)
took = [int(t) for t in re.findall(r"Updated command buffer in (\d+) \S+; num_commands", text)]
execs = len(re.findall(r"Execute command buffer on device #\d+", text))
by_cmds = collections.defaultdict(list)
for after, n in ups:
    by_cmds[int(n)].append(int(after))
print(f"   updates {len(ups)}, executions logged {execs}, update us median "
      f"{statistics.median(took) if took else '-'} max {max(took) if took else '-'}")
for n, afters in sorted(by_cmds.items(), key=lambda kv: -len(kv[1]))[:6]:
    print(f"   cmds={n}: {len(afters)} updates; executions between: {collections.Counter(afters).most_common(5)}")
PY
}
export TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=command_buffer_thunk=3
for i in 1 2 3 4 5 6; do
  run q_$i 90 --preset qwen3-30b-a3b --quantize fp8 --concurrency 1; show q_$i
done
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
