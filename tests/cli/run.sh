#!/usr/bin/env bash
# The kiln command: exit codes (0 ok, 1 user error, 2 usage error, never a
# signal) and the shape of its messages. Usage: run.sh KILN SOURCE_DIR
set -u
kiln=$1; root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0; n=0
expect() { # expect CODE DESCRIPTION -- command...
  local want=$1 what=$2; shift 3
  n=$((n+1))
  "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"; sed 's/^/  | /' "$tmp/err" | head -20; fail=$((fail+1))
  fi
}
contains() { # contains FILE TEXT DESCRIPTION
  n=$((n+1))
  if ! grep -qF -- "$2" "$1"; then echo "FAIL: $3: no '$2' in output"; sed 's/^/  | /' "$1" | head -20; fail=$((fail+1)); fi
}

expect 0 "--help" -- "$kiln" --help
contains "$tmp/out" "usage: kiln" "--help prints usage"
expect 0 "--version" -- "$kiln" --version
contains "$tmp/out" "kiln " "--version prints the version"
expect 2 "no arguments" -- "$kiln"
expect 2 "unknown command" -- "$kiln" frobnicate x.tile
contains "$tmp/err" "unknown command 'frobnicate'" "unknown command message"
expect 2 "unknown option" -- "$kiln" compile --bogus x.tile
expect 2 "no input file" -- "$kiln" compile
expect 2 "bad emit" -- "$kiln" compile --emit wat "$root/examples/vec_add.tile"
expect 1 "missing file" -- "$kiln" check "$tmp/nope.tile"
contains "$tmp/err" "cannot read" "missing file message"

printf 'kernel k(X: *f32) {\n  let y = load(X + arange(4)) +;\n}\n' > "$tmp/bad.tile"
expect 1 "syntax error" -- "$kiln" check "$tmp/bad.tile"
contains "$tmp/err" "bad.tile:2:" "diagnostic has file:line"
contains "$tmp/err" "error:" "diagnostic says error"
contains "$tmp/err" "^" "diagnostic has a caret"

# Random bytes never crash the compiler (exit 0 or 1, never a signal).
for i in 1 2 3 4 5; do
  head -c 400 /dev/urandom > "$tmp/junk$i.tile"
  n=$((n+1)); "$kiln" check "$tmp/junk$i.tile" >/dev/null 2>&1; rc=$?
  if [ $rc -gt 1 ]; then echo "FAIL: random input $i: exit $rc"; cp "$tmp/junk$i.tile" /tmp/kiln-crash-$i.tile; fail=$((fail+1)); fi
done

if [ -f "$root/examples/vec_add.tile" ]; then
  expect 0 "check vec_add" -- "$kiln" check "$root/examples/vec_add.tile"
  expect 0 "emit ast" -- "$kiln" compile --emit ast "$root/examples/vec_add.tile"
  expect 0 "emit ir" -- "$kiln" compile --emit ir "$root/examples/vec_add.tile"
  contains "$tmp/out" "kernel @vec_add" "IR names the kernel"
  expect 0 "dump-after all" -- "$kiln" compile --dump-after all "$root/examples/vec_add.tile"
  contains "$tmp/err" "IR after" "dump-after prints dumps"
  expect 0 "run on the CPU" -- "$kiln" run --cpu "$root/examples/vec_add.tile" --grid 4 X=rand:1000 Y=rand:1000 Z=zeros:1000 n=1000
  contains "$tmp/out" "Z: f32[1000]" "run prints the output buffer"
  expect 2 "run with a missing argument" -- "$kiln" run --cpu "$root/examples/vec_add.tile" X=rand:10
  contains "$tmp/err" "missing argument" "missing argument message"
  expect 1 "run out of bounds" -- "$kiln" run --cpu "$root/examples/vec_add.tile" --grid 4 X=rand:10 Y=rand:10 Z=zeros:10 n=1000
  expect 0 "emit ptx" -- "$kiln" compile --emit ptx --arch sm_80 "$root/examples/vec_add.tile"
  contains "$tmp/out" ".entry vec_add" "PTX has the kernel entry"
  expect 2 "bad arch" -- "$kiln" compile --emit ptx --arch sm_12 "$root/examples/vec_add.tile"
fi

echo "$((n-fail)) passed, $fail failed"
[ $fail -eq 0 ]
