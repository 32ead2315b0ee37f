# Sourced by the tools/device_bench_*.sh scripts on the GPU machine, from the repository root:
# unpacks .carry/bundle.tar.xz (tools/device_pack.sh) into /tmp/kiln, points the dynamic loader,
# the runtime's source and cache directories at it, makes $out ($OUT, else /tmp/kiln-out) and
# prints the GPU and its clocks (read only: the card's settings are never changed).
root=$PWD
out=${OUT:-/tmp/kiln-out}
mkdir -p "$out" /tmp/kiln
tar -C /tmp/kiln -xJf .carry/bundle.tar.xz
export LD_LIBRARY_PATH=/tmp/kiln/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KILN_SOURCE_DIR=$root KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
