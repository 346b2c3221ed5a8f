# Prepared in session 11 for session 12 (~4 min): the decode attention on 8K tables, around the new long-table
# launch (34 splits of 128-key steps at C1: 15.1 µs a layer in the llama-3.1-8b engine, s11h; 2.2 TB/s on
# 33.5 MB of K/V). 1) C1 (the bucket's padding row counted): splits x pipeline depth x warps at 128-key steps;
# 2) 4 and 16 rows: the new default (18 / 6 splits of 128) against the old paged rule's 9 / 3 splits of 64 and
# the mixes, to check the doubling where s11a did not time it. (In the table "s0 bk128" is the paged rule's 17
# splits at 128 keys, "sdefault bkdefault" the api's launch.)
BUDGET_S=${BUDGET_S:-300}
source benchmarks/campaign_lib.sh
chk() { timeout $1 python3 -m benchmarks.fused_decode_check --shapes llama-3.1-8b --contexts 8192 --max-len 8400 "${@:2}"; }
chk 150 --batches 1 --padding-row --splits 0,50,66 --stages 0,3 --block-tokens 0,128 --warps 0,8 > $OUT/c1.log 2>&1
chk 60 --batches 4 --splits 0,9,18 --block-tokens 0,64 > $OUT/c4.log 2>&1
chk 60 --batches 16 --splits 0,3,6 --block-tokens 0,64 > $OUT/c16.log 2>&1
for f in c1 c4 c16; do echo "== $f"; grep -E "^\| llama" $OUT/$f.log | cut -d'|' -f3-5,10-12; done
