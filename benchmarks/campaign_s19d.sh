# Session 19 (~9 min): is the decode slow mode per process or per loaded executable, and does the CUDA
# environment move it? benchmarks/mode_probe.py builds 3 engines one after another in each process (fresh
# executables, fresh CUDA graphs) and times 2 C1 rounds each (qwen3-30b-a3b fp8: fast ~2.72, slow ~3.0 ms a
# step), tracing the last round's launch edges. Processes alternate the default environment with
# CUDA_DEVICE_MAX_CONNECTIONS=32 / =1 and CUDA_MODULE_LOADING=EAGER.
BUDGET_S=${BUDGET_S:-560}
source benchmarks/campaign_lib.sh
probe() {
  local name=$1; shift
  local left=$((END - SECONDS)); [ $left -lt 60 ] && { echo "== $name skipped"; return; }
  env "$@" timeout $((left < 150 ? left : 150)) python3 -m benchmarks.mode_probe --preset qwen3-30b-a3b --quantize fp8 \
    --engines 3 --rounds 2 --trace --out $OUT/rounds.jsonl > $OUT/$name.log 2>&1
  echo "== $name rc $? ($SECONDS s)"
  grep -E "^round" $OUT/$name.log | sed -E "s/pid=[0-9]+ //; s/cache=\{[^}]*\} ?//; s/'executables'.*//" | cut -c1-200
}
probe default1 X=1
probe conn32 CUDA_DEVICE_MAX_CONNECTIONS=32
probe default2 X=2
probe conn1 CUDA_DEVICE_MAX_CONNECTIONS=1
probe eager CUDA_MODULE_LOADING=EAGER
probe default3 X=3
