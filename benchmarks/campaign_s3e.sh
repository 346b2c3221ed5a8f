# Session 3, call 5: the real fp8 qwen3-30b-a3b's executable call, host side (is the 7-8 ms tick the call?).
timeout 150 python3 -m benchmarks.host_overhead --preset qwen3-30b-a3b --quantize fp8 --real-widths --tokens 100 2>&1 | grep -E "leaves|Error"
timeout 100 python3 -m benchmarks.host_overhead --preset qwen3-30b-a3b --quantize fp8 --tokens 100 2>&1 | grep -E "leaves|Error"
