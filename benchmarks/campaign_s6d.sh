# Session 6: what the host pays per decode call. host_probe splits it into per-argument, per-Pallas-kernel and
# per-XLA-kernel costs under three command-buffer settings; host_overhead times the tiny-width qwen3-30b-a3b fp8
# tick under the same settings; one optimized-HLO dump of that tick shows which kernels sit outside CUDA graphs.
python3 -m pip install --no-deps -q llguidance-*.whl
F_MIN1="--xla_gpu_graph_min_graph_size=1"
F_CC="--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN"
F_OFF="--xla_gpu_enable_command_buffer="
for f in "" "$F_MIN1" "$F_CC" "$F_OFF"; do
  XLA_FLAGS="$f" timeout 100 python3 -m benchmarks.host_probe >> $OUT/probe.log 2>&1
done
for f in "" "$F_MIN1" "$F_CC"; do
  XLA_FLAGS="$f" timeout 120 python3 -m benchmarks.host_overhead --preset qwen3-30b-a3b --quantize fp8 >> $OUT/overhead.log 2>&1
done
XLA_FLAGS="--xla_dump_to=$OUT/dump --xla_dump_hlo_as_text" timeout 120 python3 -m benchmarks.host_overhead \
    --preset qwen3-30b-a3b --quantize fp8 --tokens 20 --label dump >> $OUT/overhead.log 2>&1
(cd $OUT && ls dump | grep -c . && tar czf dump.tgz $(ls dump/*after_optimizations.txt 2>/dev/null | xargs ls -S | head -4 | sed 's|^|./|') && rm -rf dump)
grep -E "us/call|ms/tick|Error|error:" $OUT/probe.log $OUT/overhead.log | cut -c1-200
