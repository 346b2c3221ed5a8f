# The probe and its kernel (dgjax/pallas/tma_gemv) lost and were removed; they are at commit 373a093.
# Session 27: a TMA-fed warpgroup-MMA GEMV (Pallas Mosaic GPU, dgjax/pallas/tma_gemv) in bf16 and bf12 against
# XLA's bf16 dot and the Triton bf12 quant_gemv at llama-3.1-8b shapes (benchmarks/tma_gemv_probe.py).
python3 -m pip install --no-deps -q llguidance-*.whl
timeout ${BUDGET_S:-500} python3 -m benchmarks.tma_gemv_probe --out $OUT/probe > $OUT/probe.log 2>&1
grep -E "failed|Error" $OUT/probe.log | sort | uniq -c | head -20
sed -n '/^read ceiling/,$p' $OUT/probe.log
cd $OUT && tar czf runs.tgz *.log */*.md 2>/dev/null; rm -rf */ *.log
