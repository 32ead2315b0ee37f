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

# Schedules, hints, GPU IR and --stats (the options docs/tutorial.md shows).
if [ -f "$root/examples/vec_add.tile" ]; then
  v="$root/examples/vec_add.tile"
  expect 0 "emit gpu-ir" -- "$kiln" compile --emit gpu-ir --arch sm_80 "$v"
  contains "$tmp/out" "#blocked<" "GPU IR shows layouts"
  contains "$tmp/out" "kernel @vec_add(" "GPU IR names the kernel"
  expect 0 "--stats" -- "$kiln" compile --emit ptx --arch sm_80 --stats -o "$tmp/v.ptx" "$v"
  contains "$tmp/err" "warps: 4" "--stats prints the kernel's warps (stderr)"
  contains "$tmp/err" "stages: 2" "--stats prints the default stages"
  contains "$tmp/v.ptx" ".entry vec_add" "-o writes the PTX to the file"
  expect 0 "--num-warps 8" -- "$kiln" compile --emit ptx --arch sm_80 --num-warps 8 --stats "$v"
  contains "$tmp/err" "warps: 8" "--num-warps overrides the kernel's setting"
  contains "$tmp/out" ".maxntid 256, 1, 1" "8 warps are 256 threads"
  expect 1 "--num-warps 3" -- "$kiln" compile --emit ptx --arch sm_80 --num-warps 3 "$v"
  contains "$tmp/err" "num_warps must be a power of two" "bad --num-warps message"
  expect 2 "--num-stages -1" -- "$kiln" compile --num-stages -1 "$v"
  # --assume: hinted pointers and n give 16-byte vector loads; without hints, none.
  expect 0 "--assume" -- "$kiln" compile --emit ptx --arch sm_80 --assume n=16 --assume X=16 --assume Y=16 --assume Z=16 "$v"
  contains "$tmp/out" "ld.global.v4" "--assume lets vec_add use 16-byte loads"
  expect 0 "no --assume" -- "$kiln" compile --emit ptx --arch sm_80 "$v"
  n=$((n+1)); if grep -q "ld.global.v4" "$tmp/out"; then echo "FAIL: vector loads without --assume (X + 1 is legal)"; fail=$((fail+1)); fi
  expect 2 "--assume without a value" -- "$kiln" compile --assume n "$v"
  expect 1 "--assume not a power of two" -- "$kiln" compile --assume n=3 "$v"
  contains "$tmp/err" "power of two" "--assume n=3 message"
  expect 1 "--assume on a const parameter" -- "$kiln" compile --assume BLOCK=16 "$v"
  contains "$tmp/err" "const parameter" "--assume BLOCK message"
  expect 1 "--assume unknown name" -- "$kiln" compile --assume nope=16 "$v"
  contains "$tmp/err" "'nope'" "--assume names the unknown parameter"
  expect 1 "-D unknown name" -- "$kiln" compile -D BLOCKK=128 "$v"
  contains "$tmp/err" "did you mean 'BLOCK'?" "-D suggests the const parameter"
  expect 1 "-D not a power of two" -- "$kiln" compile -D BLOCK=100 "$v"
  contains "$tmp/err" "power of two" "-D BLOCK=100 message"
  expect 1 "-k unknown kernel" -- "$kiln" compile -k nope "$v"
  contains "$tmp/err" "no kernel named 'nope'" "-k names the missing kernel"
fi
m="$root/docs/snippets/matmul.tile"
if [ -f "$m" ]; then
  hints="--assume A=16 --assume B=16 --assume K=16 --assume N=16"
  # shellcheck disable=SC2086
  expect 0 "matmul tensor cores" -- "$kiln" compile --emit ptx --arch sm_80 --stats $hints "$m"
  contains "$tmp/out" "mma.sync.aligned.m16n8k16" "f16 dot uses mma.sync"
  contains "$tmp/out" "ldmatrix.sync.aligned" "dot operands come through ldmatrix"
  contains "$tmp/out" "cp.async.cg.shared.global" "3 stages pipeline with cp.async"
  contains "$tmp/out" "cp.async.wait_group 1;" "3 stages wait for all but one group"
  contains "$tmp/err" "stages: 3" "--stats shows the kernel's stages"
  contains "$tmp/err" "pipeline stages" "--stats lists the pipeline buffers"
  # shellcheck disable=SC2086
  expect 0 "matmul --num-stages 1" -- "$kiln" compile --emit ptx --arch sm_80 --num-stages 1 --stats $hints "$m"
  n=$((n+1)); if grep -q "cp.async" "$tmp/out"; then echo "FAIL: --num-stages 1 still pipelines"; fail=$((fail+1)); fi
  contains "$tmp/err" "stages: 1" "--num-stages overrides the kernel's setting"
  # shellcheck disable=SC2086
  expect 0 "matmul gpu-ir" -- "$kiln" compile --emit gpu-ir --arch sm_80 $hints "$m"
  contains "$tmp/out" "#mma<C" "GPU IR shows the MMA accumulator layout"
  contains "$tmp/out" "pipeline.stages = 3" "GPU IR marks the pipelined loop"
fi
w="$root/docs/snippets/wrong.tile"
if [ -f "$w" ] && [ -f "$root/docs/snippets/wrong.expected" ]; then
  # The tutorial's diagnostics, byte for byte (the path as given on the command line).
  n=$((n+1))
  (cd "$root" && "$kiln" check docs/snippets/wrong.tile) >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ $rc -ne 1 ] || ! cmp -s "$tmp/err" "$root/docs/snippets/wrong.expected"; then
    echo "FAIL: kiln check docs/snippets/wrong.tile: exit $rc, diagnostics differ from wrong.expected"
    diff "$root/docs/snippets/wrong.expected" "$tmp/err" | head -20; fail=$((fail+1))
  fi
fi

# Schedule overrides must be at least 1; a misspelt hint gets a suggestion.
if [ -f "$root/examples/vec_add.tile" ]; then
  expect 2 "--num-stages 0" -- "$kiln" compile --num-stages 0 "$root/examples/vec_add.tile"
  contains "$tmp/err" "--num-stages must be at least 1" "--num-stages 0 message"
  expect 1 "misspelt --assume" -- "$kiln" compile --assume nn=16 "$root/examples/vec_add.tile"
  contains "$tmp/err" "did you mean 'n'?" "--assume suggestion"
fi

# After ptxas, --stats also reports registers and spills.
if [ -f "$root/examples/vec_add.tile" ] && [ -x /usr/local/cuda/bin/ptxas ]; then
  expect 0 "cubin --stats" -- "$kiln" compile --emit cubin --stats -o "$tmp/v.cubin" "$root/examples/vec_add.tile"
  contains "$tmp/err" "registers: " "--stats reports registers after ptxas"
  contains "$tmp/err" "spills: 0 bytes stored" "--stats reports spills after ptxas"
fi

echo "$((n-fail)) passed, $fail failed"
[ $fail -eq 0 ]
