# Session 13, call f (~5 min): llama-3.1-8b (attention and its merge the only Pallas kernels) with early PDL
# triggers (auto) and without (off) at C16 and C4, 1K context, interleaved; s13d's C16 runs with the trigger
# read 3288.7 / 3290.6 tok/s against s12h's 3251.7 without (another call). s13c/e: the trigger costs the MoE
# presets 1-2% (glm-4.5-air fp8 C1 164.2 / 164.2 vs 167.7 / 167.6), so it matters whether dense models gain.
BUDGET_S=${BUDGET_S:-280}
source benchmarks/campaign_lib.sh
for i in 1 2; do
  DGJAX_PDL_TRIGGER=off run c16_off_$i 90 --preset llama-3.1-8b --concurrency 16
  DGJAX_PDL_TRIGGER=auto run c16_auto_$i 60 --preset llama-3.1-8b --concurrency 16
done
DGJAX_PDL_TRIGGER=off run c4_off_1 60 --preset llama-3.1-8b --concurrency 4
DGJAX_PDL_TRIGGER=auto run c4_auto_1 60 --preset llama-3.1-8b --concurrency 4
(cd $OUT && tar czf runs.tgz */ *.log 2>/dev/null && rm -rf */ *.log)  # a call returns at most 8 files
