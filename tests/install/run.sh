#!/usr/bin/env bash
# run.sh — `cmake --install` gives a working prefix (ctest install/prefix).
#
# Installs the build into a fresh temporary prefix, checks its layout, then,
# with no source tree in sight (KILN_SOURCE_DIR unset, the working directory
# elsewhere): builds tests/install/consumer.c with
# `cc $(pkg-config --cflags --libs kiln)` and runs it (it compiles the shipped
# attention program to PTX, finds lib/variants/alibi.tile in the prefix
# through kiln_data_path, runs vec_add on the CPU interpreter, reports "no
# GPU" cleanly); builds it again through find_package(Kiln), on the shared and
# on the static library; runs the installed
# `kiln check` on a shipped program by its short name and the installed
# `kiln-examples --cpu`. Exit 0 when all of it works.
#
# Usage: run.sh BUILD_DIR SOURCE_DIR [EXTRA_CFLAGS]
# EXTRA_CFLAGS: what a sanitizer build's libkiln.so needs in its programs too
# (-fsanitize=...: the sanitizer runtime must come first).
set -euo pipefail
extra=${3:-}
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
prefix=$(mktemp -d /tmp/kiln-install.XXXXXX)
work=$(mktemp -d /tmp/kiln-consumer.XXXXXX)
trap 'rm -rf "$prefix" "$work"' EXIT
unset KILN_SOURCE_DIR KILN_DATA_DIR

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/kiln bin/kiln-examples lib/libkiln.a lib/libkiln.so include/kiln/kiln.h include/kiln/kiln_compile.h include/kiln/kiln_attention.h include/kiln/kiln_tune.h \
         include/kiln/kiln_runtime.h share/kiln/lib/attention_fwd.tile share/kiln/lib/variants/alibi.tile \
         share/kiln/examples/vec_add.tile \
         lib/pkgconfig/kiln.pc lib/cmake/Kiln/KilnConfig.cmake lib/cmake/Kiln/KilnConfigVersion.cmake; do
  [ -e "$prefix/$f" ] || { echo "install: missing $f"; exit 1; }
done
# Only the public headers are installed.
n=$(ls "$prefix/include/kiln" | wc -l)
[ "$n" = 5 ] || { echo "install: include/kiln holds $n files, want the 5 public headers"; exit 1; }

cd "$work"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion kiln)" = "$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/kiln.pc")" ]
cc -std=c17 -Wall -Wextra -Werror $extra "$src/tests/install/consumer.c" -o consumer $(pkg-config --cflags --libs kiln)
LD_LIBRARY_PATH="$prefix/lib" ./consumer "$prefix/share/kiln"
# The program really runs on the installed shared library.
# (ldd's output is kept first: grep -q may close the pipe early, which pipefail counts.)
libs=$(LD_LIBRARY_PATH="$prefix/lib" ldd ./consumer)
grep -q "$prefix/lib/libkiln.so" <<< "$libs" || { echo "install: consumer does not load $prefix/lib/libkiln.so"; exit 1; }

cmake -S "$src/tests/install" -B cmk -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="$extra" >/dev/null
cmake --build cmk >/dev/null
LD_LIBRARY_PATH="$prefix/lib" ./cmk/consumer "$prefix/share/kiln" >/dev/null
# The static library needs no libkiln.so at run time. Linked into a program
# outside the prefix, it finds the shipped files through KILN_DATA_DIR (what
# KilnConfig.cmake's KILN_DATA_DIR is for).
KILN_DATA_DIR="$prefix/share/kiln" ./cmk/consumer_static "$prefix/share/kiln" >/dev/null
libs=$(ldd ./cmk/consumer_static)
if grep -q libkiln <<< "$libs"; then echo "install: consumer_static loads libkiln.so"; exit 1; fi

# The installed programs find the shipped .tile files from the prefix alone.
"$prefix/bin/kiln" check examples/softmax.tile
"$prefix/bin/kiln-examples" --cpu | tail -1
# ... from the prefix, not from the source tree the build came from: a file only
# the prefix has is found, and a broken installed copy is the one that is read.
printf 'kernel probe(X: *f32) {\n    store(X, nope);\n}\n' > "$prefix/share/kiln/examples/probe.tile"
if "$prefix/bin/kiln" check examples/probe.tile 2> probe.err; then echo "install: probe.tile compiled"; exit 1; fi
grep -q "probe.tile:2:.*error" probe.err || { echo "install: kiln check did not read the prefix's probe.tile:"; cat probe.err; exit 1; }
echo 'this is not a tile program' > "$prefix/share/kiln/examples/vec_add.tile"
if "$prefix/bin/kiln-examples" --cpu > examples.out 2>&1; then echo "install: kiln-examples ignored the prefix"; exit 1; fi
grep -q "$prefix/share/kiln/examples/vec_add.tile" examples.out ||
  { echo "install: kiln-examples did not read the prefix's vec_add.tile:"; cat examples.out; exit 1; }
echo "install: ok ($prefix)"
