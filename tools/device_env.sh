# Sourced by the tools/device_bench_*.sh scripts on the GPU machine, from the repository root:
# unpacks .carry/bundle.tar.xz (tools/device_pack.sh) into /tmp/kiln, points the dynamic loader,
# the runtime's source and cache directories at it, makes $out ($OUT, else /tmp/kiln-out) and
# prints the GPU and its clocks (read only: the card's settings are never changed).
# $kiln is where the bundle went (KILN_UNPACK_DIR, else /tmp/kiln: the scripts' tests use another);
# KILN_BUNDLE names another bundle (several carried at once for an A/B: unpack each into its own dir).
root=$PWD
out=${OUT:-/tmp/kiln-out}
kiln=${KILN_UNPACK_DIR:-/tmp/kiln}
mkdir -p "$out" "$kiln"
tar -C "$kiln" -xJf "${KILN_BUNDLE:-.carry/bundle.tar.xz}"
export LD_LIBRARY_PATH=$kiln/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KILN_SOURCE_DIR=$root KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
