#!/usr/bin/env bash
# On the GPU machine, with .carry/bundle.tar.xz (tools/device_pack.sh) and a baseline bundle
# .carry/base.tar.xz (the same script run on an older commit, renamed) carried along:
# attention --quick with the new bundle (with peers) and the
# baseline bundle (Kiln only) on the same GPU, then decode against SDPA (bench_decode.py).
# SKIP_ATTN=1: decode only; DECODE_TIMEOUT (seconds, default 250) bounds the decode bench.
# Tables to $OUT/*.md, CSVs to $OUT/*.csv, SVG charts to $OUT/img/, all logs in $OUT/bench_logs.tgz.
set -uo pipefail
root=$PWD; res=/tmp/res; mkdir -p $res /tmp/kn /tmp/kb
tar -C /tmp/kn -xJf .carry/bundle.tar.xz; tar -C /tmp/kb -xJf .carry/base.tar.xz
export KILN_SOURCE_DIR=$root PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
attn() {
  LD_LIBRARY_PATH=/tmp/$1/lib KILN_CACHE_DIR=/tmp/cache-$1 timeout 280 python3 tools/bench/bench_attention.py \
    --kiln-bin /tmp/$1/bin/kiln-bench-attn --quick --providers $2 --no-memory --no-compile --out $res/attn-$1 \
    > $res/attn-$1.log 2>&1; echo "attention $1 exit $?"
}
[ "${SKIP_ATTN:-0}" = 1 ] || { attn kn kiln,sdpa_flash,sdpa_cudnn; attn kb kiln; }
LD_LIBRARY_PATH=/tmp/kn/lib KILN_CACHE_DIR=/tmp/cache-kn timeout ${DECODE_TIMEOUT:-250} python3 tools/bench/bench_decode.py \
  --kiln-bin /tmp/kn/bin/kiln-bench-decode --quick --out $res/decode > $res/decode.log 2>&1; echo "decode exit $?"
for f in attn-kn/attention_bench.md attn-kb/attention_bench.md decode/decode_bench.md \
         attn-kn/attention_bench.csv decode/decode_bench.csv; do
  [ -f $res/$f ] && cp $res/$f $OUT/$(dirname $f).${f##*.}; done
# the charts (tools/bench/plot_svg.py; copy them to docs/img/)
[ -f $res/attn-kn/attention_bench.csv ] && python3 tools/bench/plot_svg.py --preset forward $res/attn-kn/attention_bench.csv -o $OUT/img
[ -f $res/decode/decode_bench.csv ] && python3 tools/bench/plot_svg.py --preset decode $res/decode/decode_bench.csv -o $OUT/img
tar -C $res -czf $OUT/bench_logs.tgz . 
echo "== new"; cat $res/attn-kn/attention_bench.md 2>/dev/null | head -40 || tail -20 $res/attn-kn.log
echo "== base"; cat $res/attn-kb/attention_bench.md 2>/dev/null | head -30 || tail -20 $res/attn-kb.log
echo "== decode"; cat $res/decode/decode_bench.md 2>/dev/null || tail -30 $res/decode.log
