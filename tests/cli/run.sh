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

# import: a hooks-only variant checks against the embedded library; -I finds a module
expect 0 "check a shipped variant" -- "$kiln" check "$root/lang/lib/variants/gemma2.tile"
mkdir -p "$tmp/inc"
printf 'fn twice(x) { return x * 2.0; }\n' > "$tmp/inc/twice.tile"
printf 'import twice;\nkernel k(X: *f32) { store(X, twice(1.0)); }\n' > "$tmp/uses.tile"
expect 1 "import without -I" -- "$kiln" check "$tmp/uses.tile"
contains "$tmp/err" "uses.tile:1:8: error: cannot find module 'twice'" "missing module is located"
expect 0 "import with -I" -- "$kiln" check -I "$tmp/inc" "$tmp/uses.tile"
expect 0 "import with -IDIR" -- "$kiln" check "-I$tmp/inc" "$tmp/uses.tile"
expect 2 "-I without a value" -- "$kiln" check "$tmp/uses.tile" -I

printf 'kernel k(X: *f32) {\n  let y = load(X + arange(4)) +;\n}\n' > "$tmp/bad.tile"
expect 1 "syntax error" -- "$kiln" check "$tmp/bad.tile"
contains "$tmp/err" "bad.tile:2:" "diagnostic has file:line"
contains "$tmp/err" "error:" "diagnostic says error"
contains "$tmp/err" "^" "diagnostic has a caret"

printf 'kernel k(X: *f32) {\n  store(X, 1.0);\n}\n  x\0y\nkernel bad( {\n' > "$tmp/nul.tile"
expect 1 "NUL byte" -- "$kiln" check "$tmp/nul.tile"
contains "$tmp/err" "nul.tile:4:4: error: NUL byte in the source" "a NUL byte is a located error"

# kiln tune: the declared space compiled, pruned and checked (the interpreter without a GPU)
cat > "$tmp/tuned.tile" <<'EOF2'
kernel axpy(X: *f32, Z: *f32, n: i32, const BLOCK: i32 = 128, const BAD: i32 = 0)
{
    let offs = program_id(0) * BLOCK + arange(BLOCK);
    store(Z + offs, load(X + offs, mask = offs < n) * 2.0 + (BLOCK == BAD ? 1.0 : 0.0), mask = offs < n);
}
tune axpy { BLOCK in [64, 128, 256]; num_warps in [1, 2]; key n; }
EOF2
expect 0 "tune, compile only" -- "$kiln" tune "$tmp/tuned.tile" -k axpy --no-run --jobs 2
contains "$tmp/out" "6 configs (6 of 6 kept by the constraints), 6 kept, 0 timed" "tune prints its table"
expect 0 "tune on the interpreter" -- "$kiln" tune "$tmp/tuned.tile" -k axpy --cpu --grid 300/BLOCK X=rand:300 Z=out:300 n=300 --csv "$tmp/t.csv" --svg "$tmp/t.svg"
contains "$tmp/t.csv" "BLOCK,num_warps,time_ms," "tune writes the CSV"
contains "$tmp/t.svg" "<svg xmlns" "tune writes the SVG"
expect 1 "tune catches a wrong config" -- "$kiln" tune "$tmp/tuned.tile" -k axpy -D BAD=128 --cpu --grid 300/BLOCK X=rand:300 Z=out:300 n=300
contains "$tmp/out" "wrong result: differs from config 0" "the disagreeing config's row says why"
expect 2 "tune without -k" -- "$kiln" tune "$tmp/tuned.tile"
expect 2 "tune with a bad number" -- "$kiln" tune "$tmp/tuned.tile" -k axpy --jobs x
printf 'kernel k(X: *f32, const B: i32 = 64) { store(X + arange(B), 1.0); }\ntune k { B in [64]; C in [1]; }\n' > "$tmp/badtune.tile"
expect 1 "tune a bad space" -- "$kiln" tune "$tmp/badtune.tile" -k k
contains "$tmp/err" "badtune.tile:2:21: error: 'C' is no const parameter of kernel 'k'" "a bad space is a located error"

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
  contains "$tmp/err" "error: unknown architecture 'sm_12' (expected sm_80, sm_86, sm_89, sm_90 or sm_90a)" "bad arch message"
  [ "$(grep -c error "$tmp/err")" = 1 ] || { echo "FAIL: bad arch: not exactly one error line"; fail=$((fail+1)); }
  # --emit cubin runs the ptxas that KILN_PTXAS names (compiler/support/ptxas.c): a fake one
  # that records its arguments and reports registers like ptxas -v.
  printf '#!/bin/sh\nprintf "%%s " "$@" > "%s/args"\necho CUBIN > "$4"\necho "ptxas info : Used 40 registers" >&2\n' "$tmp" > "$tmp/fake-ptxas"
  chmod +x "$tmp/fake-ptxas"
  KILN_PTXAS="$tmp/fake-ptxas" expect 0 "emit cubin with KILN_PTXAS" -- "$kiln" compile --emit cubin --arch sm_80 --stats -o "$tmp/v.cubin" "$root/examples/vec_add.tile"
  contains "$tmp/v.cubin" "CUBIN" "the cubin is what ptxas wrote"
  contains "$tmp/args" "-v -arch=sm_80 -o " "ptxas arguments"
  contains "$tmp/err" "registers: 40 (ptxas)" "--stats reads the ptxas log"
  KILN_PTXAS="$tmp/no-such-ptxas" expect 1 "emit cubin without ptxas" -- "$kiln" compile --emit cubin --arch sm_80 "$root/examples/vec_add.tile"
  contains "$tmp/err" "error: ptxas not found: KILN_PTXAS=$tmp/no-such-ptxas is not an executable file" "ptxas not found message"
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
  if grep -q "^time " "$tmp/err"; then echo "FAIL: --stats alone prints phase times"; fail=$((fail+1)); fi
  expect 0 "--time" -- "$kiln" compile --emit ptx --arch sm_80 --time -o "$tmp/v.ptx" "$v"
  for phase in front-end gpu-passes lower llvm-opt llvm-codegen; do
    contains "$tmp/err" "time $phase: " "--time prints the $phase phase"
  done
  if grep -q "^warps" "$tmp/err"; then echo "FAIL: --time alone prints the kernel's stats"; fail=$((fail+1)); fi
  expect 0 "--num-warps 8" -- "$kiln" compile --emit ptx --arch sm_80 --num-warps 8 --stats "$v"
  contains "$tmp/err" "warps: 8" "--num-warps overrides the kernel's setting"
  contains "$tmp/out" ".maxntid 256, 1, 1" "8 warps are 256 threads"
  expect 2 "--num-warps 3" -- "$kiln" compile --emit ptx --arch sm_80 --num-warps 3 "$v"
  contains "$tmp/err" "num-warps must be a power of two" "bad --num-warps message"
  expect 2 "--num-stages -1" -- "$kiln" compile --num-stages -1 "$v"
  # --assume: hinted pointers and n give 16-byte vector loads; without hints, none.
  expect 0 "--assume" -- "$kiln" compile --emit ptx --arch sm_80 --assume n=16 --assume X=16 --assume Y=16 --assume Z=16 "$v"
  contains "$tmp/out" "ld.global.v4" "--assume lets vec_add use 16-byte loads"
  expect 0 "no --assume" -- "$kiln" compile --emit ptx --arch sm_80 "$v"
  n=$((n+1)); if grep -q "ld.global.v4" "$tmp/out"; then echo "FAIL: vector loads without --assume (X + 1 is legal)"; fail=$((fail+1)); fi
  expect 2 "--assume without a value" -- "$kiln" compile --assume n "$v"
  expect 2 "--assume not a power of two" -- "$kiln" compile --assume n=3 "$v"
  contains "$tmp/err" "--assume expects NAME=DIV with DIV a power of two (1 to 2^30), or NAME==1, got 'n=3'" "--assume n=3 message"
  expect 2 "--assume 0" -- "$kiln" compile --assume n=0 "$v"
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
  contains "$tmp/err" "--num-stages must be between 1 and 1024, got '0'" "--num-stages 0 message"
  expect 2 "--num-stages 2000" -- "$kiln" compile --num-stages 2000 "$root/examples/vec_add.tile"
  contains "$tmp/err" "--num-stages must be between 1 and 1024, got '2000'" "--num-stages 2000 message"
  expect 0 "--num-stages 1024" -- "$kiln" compile --num-stages 1024 "$root/examples/vec_add.tile"
  expect 1 "misspelt --assume" -- "$kiln" compile --assume nn=16 "$root/examples/vec_add.tile"
  contains "$tmp/err" "did you mean 'n'?" "--assume suggestion"
fi

# Issue 12: no hang, no lost output, no silently accepted bad input.
if [ -f "$root/examples/vec_add.tile" ]; then
  v="$root/examples/vec_add.tile"
  # Output that cannot be written is an error, not a silent exit 0.
  if [ -w /dev/full ]; then
    expect 1 "-o /dev/full" -- "$kiln" compile -o /dev/full "$v"
    contains "$tmp/err" "kiln: cannot write '/dev/full': No space left on device" "-o /dev/full message"
    expect 1 "> /dev/full" -- bash -c '"$1" compile "$2" > /dev/full' _ "$kiln" "$v"
    contains "$tmp/err" "kiln: cannot write 'stdout': No space left on device" "stdout full message"
    expect 1 "run > /dev/full" -- bash -c '"$1" run --cpu "$2" X=ones:8 Y=ones:8 Z=zeros:8 n=8 > /dev/full' _ "$kiln" "$v"
    expect 1 "--help > /dev/full" -- bash -c '"$1" --help > /dev/full' _ "$kiln"
  fi
  # A reader that went away: a reported write error (exit 1), not a death by SIGPIPE.
  # (stdout is a pipe whose read end is already closed: no race with the reader)
  if command -v python3 >/dev/null; then
    expect 1 "stdout closed early" -- python3 -c 'import os, subprocess, sys
r, w = os.pipe(); os.close(r); sys.exit(subprocess.call(sys.argv[1:], stdout=w))' "$kiln" compile "$v"
    contains "$tmp/err" "kiln: cannot write 'stdout': Broken pipe" "closed pipe message"
  fi
  # Inputs that never end or are not files are refused at once (timeout: a hang fails).
  expect 1 "check /dev/zero" -- timeout 20 "$kiln" check /dev/zero
  contains "$tmp/err" "cannot read '/dev/zero': not a regular file or a pipe" "/dev/zero message"
  # (only where kiln starts at all under the limit: a sanitizer build reserves terabytes)
  if bash -c 'ulimit -v 1000000; "$1" --version' _ "$kiln" >/dev/null 2>&1; then
    expect 1 "check /dev/zero under ulimit -v" -- bash -c 'ulimit -v 1000000; timeout 20 "$1" check /dev/zero' _ "$kiln"
    expect 1 "piped zeros under ulimit -v" -- bash -c 'ulimit -v 1000000; timeout 20 "$1" check /dev/stdin < /dev/zero' _ "$kiln"
  fi
  expect 1 "check a directory" -- "$kiln" check "$tmp"
  contains "$tmp/err" "Is a directory" "directory message"
  mkfifo "$tmp/fifo" && expect 1 "check a FIFO nobody writes" -- timeout 20 "$kiln" check "$tmp/fifo"
  truncate -s 17M "$tmp/huge.tile"
  expect 1 "source above the size limit" -- "$kiln" check "$tmp/huge.tile"
  contains "$tmp/err" "larger than 16 MiB, the limit for a source file" "size limit message"
  expect 1 "piped source above the size limit" -- bash -c 'head -c 17000000 /dev/zero | timeout 20 "$1" check /dev/stdin' _ "$kiln"
  contains "$tmp/err" "larger than 16 MiB" "piped size limit message"
  expect 0 "piped source" -- bash -c 'timeout 20 "$1" check /dev/stdin < "$2"' _ "$kiln" "$v"
  # Scalars are exact: integers in the range of their type, no rounding, no wrapping.
  r=(run --cpu "$v" X=ones:8 Y=ones:8 Z=zeros:8)
  expect 0 "n=0x8 (hex)" -- "$kiln" "${r[@]}" n=0x8
  contains "$tmp/out" "Z: f32[8] = [2, 2, 2" "hex n runs"
  expect 0 "n=-2147483648" -- "$kiln" "${r[@]}" n=-2147483648
  for bad in 3.7 1e30 nan -inf 1e3 " 8" 8x ""; do
    expect 2 "n='$bad' (not an integer)" -- "$kiln" "${r[@]}" "n=$bad"
    contains "$tmp/err" "argument 'n' (i32) needs an integer (decimal or 0x hex), got '$bad'" "n='$bad' message"
  done
  for bad in 5000000000 2147483648 -2147483649 99999999999999999999999; do
    expect 2 "n=$bad (out of i32)" -- "$kiln" "${r[@]}" "n=$bad"
    contains "$tmp/err" "needs an integer from -2147483648 to 2147483647, got '$bad'" "n=$bad message"
  done
  expect 2 "repeated argument" -- "$kiln" "${r[@]}" n=8 n=4
  contains "$tmp/err" "argument 'n' given twice ('n=8' and 'n=4')" "repeated argument message"
  expect 2 "bad buffer length" -- "$kiln" run --cpu "$v" X=ones:0 Y=ones:8 Z=zeros:8 n=8
  contains "$tmp/err" "bad buffer spec 'X=ones:0'" "bad buffer message"
  # Usage errors name what is allowed.
  for w in -1 0 3 64; do
    expect 2 "--num-warps $w" -- "$kiln" compile --num-warps "$w" "$v"
  done
  contains "$tmp/err" "--num-warps must be a power of two between 1 and 32" "--num-warps message"
  many=(); for i in $(seq 1 65); do many+=("a$i=1"); done
  expect 2 "65 ARG=SPEC" -- "$kiln" run --cpu "$v" "${many[@]}"
  contains "$tmp/err" "too many ARG=SPEC arguments (at most 64), at 'a65=1'" "argument limit message"
  expect 2 "--dump-after unknown pass" -- "$kiln" compile --dump-after nosuchpass "$v"
  contains "$tmp/err" "unknown pass 'nosuchpass' for --dump-after" "--dump-after message"
  contains "$tmp/err" "fold, cse, licm, dce, persistent, accelerate-dot, layout-assign, remove-convert, dot-rotate, pipeline, dot-overlap, sram-alloc" "--dump-after lists the passes"
  # schedule options: the flags come from the schedule table; tma combines with warp specialisation
  expect 0 "--tma --warp-specialize" -- "$kiln" compile --emit ptx --tma --warp-specialize "$v"
  expect 0 "--help" -- "$kiln" --help
  for f in --no-wgmma --pingpong --mbarrier --overlap --tma --warp-specialize; do
    contains "$tmp/out" "  $f " "--help lists $f"
  done
  expect 2 "run --dump-after unknown pass" -- "$kiln" run --cpu --dump-after nope "$v" X=ones:8 Y=ones:8 Z=zeros:8 n=8
  expect 0 "--dump-after a GPU pass" -- "$kiln" compile --emit gpu-ir --arch sm_80 --dump-after layout-assign "$v"
  contains "$tmp/err" "GPU IR after layout-assign" "a GPU pass name is accepted"
  expect 0 "--overlap, --dump-after dot-overlap" -- "$kiln" compile --emit gpu-ir --overlap --dump-after dot-overlap "$v"
  contains "$tmp/err" "GPU IR after dot-overlap" "--overlap is a compile option"
  expect 0 "--dump-after licm" -- "$kiln" compile --dump-after licm "$v"
  contains "$tmp/err" "IR after licm" "a target-independent pass name is accepted"
fi

# An i64 offset of 2^62 f32 elements wraps to X in 64-bit bytes: the interpreter
# reports it instead of reading X[0] (the scalar reaches it exactly, not as a double).
printf 'kernel k(X: *f32, Z: *f32, o: i64) {\n  let i = arange(4);\n  store(Z + i, load(X + o + i));\n}\n' > "$tmp/wrap.tile"
expect 1 "offset 2^62 is out of bounds" -- "$kiln" run --cpu "$tmp/wrap.tile" X=iota:4 Z=zeros:4 o=4611686018427387904
contains "$tmp/err" "wrap.tile:3:16: op 'load': load of 4 bytes out of bounds at lane 0 (index [0]): the pointer's offset overflowed the address space" "offset overflow message"
expect 0 "offset 0 reads X" -- "$kiln" run --cpu "$tmp/wrap.tile" X=iota:4 Z=zeros:4 o=0
contains "$tmp/out" "Z: f32[4] = [0, 1, 2, 3]" "offset 0 copies X"

# Float scalars: finite and in the range of the parameter's type, or nan/inf written out.
printf 'kernel sc(X: *f32, a: f32, h: f16, b: bool, u: u64, c: i8) {\n  let o = arange(8);\n  store(X + o, load(X + o) * a + h.to(f32));\n}\n' > "$tmp/sc.tile"
s=(run --cpu "$tmp/sc.tile" X=ones:8 b=1 u=18446744073709551615 c=-128)
expect 0 "float scalars" -- "$kiln" "${s[@]}" a=1.5 h=65504
contains "$tmp/out" "X: f32[8] = [65505.5" "float scalars run"
expect 0 "nan written out" -- "$kiln" "${s[@]}" a=nan h=-inf
contains "$tmp/out" "NaN: 8" "a=nan is allowed for a float parameter"
expect 2 "1e39 for f32" -- "$kiln" "${s[@]}" a=1e39 h=1
contains "$tmp/err" "argument 'a' (f32) needs a finite number in the range of its type" "f32 overflow message"
expect 2 "65520 for f16" -- "$kiln" "${s[@]}" a=1 h=65520
contains "$tmp/err" "argument 'h' (f16) needs a finite number" "f16 overflow message"
expect 2 "1e400" -- "$kiln" "${s[@]}" a=1e400 h=1
expect 2 "bool 2" -- "$kiln" run --cpu "$tmp/sc.tile" X=ones:8 a=1 h=1 b=2 u=0 c=0
contains "$tmp/err" "argument 'b' (i1) needs 0 or 1" "bool message"
expect 2 "u64 -1" -- "$kiln" run --cpu "$tmp/sc.tile" X=ones:8 a=1 h=1 b=0 u=-1 c=0
contains "$tmp/err" "needs an integer from 0 to 18446744073709551615" "u64 message"
expect 2 "i8 128" -- "$kiln" run --cpu "$tmp/sc.tile" X=ones:8 a=1 h=1 b=0 u=0 c=128

# After ptxas, --stats also reports registers and spills.
if [ -f "$root/examples/vec_add.tile" ] && [ -x /usr/local/cuda/bin/ptxas ]; then
  expect 0 "cubin --stats" -- "$kiln" compile --emit cubin --stats -o "$tmp/v.cubin" "$root/examples/vec_add.tile"
  contains "$tmp/err" "registers: " "--stats reports registers after ptxas"
  contains "$tmp/err" "spills: 0 bytes stored" "--stats reports spills after ptxas"
fi

# Tiles past what a CTA can hold are located errors (issue 12): a [2^20, 2^20]
# store compiled to a PTX body of `ret;` and its reduce crashed in codegen.
printf 'kernel k(Y: *f32, const A: i32 = 64, const B: i32 = 64) {\n    let z = zeros([A, B], f32);\n    store(Y + arange(A)[:, None] * B + arange(B)[None, :], z);\n    store(Y + arange(A), sum(z, 1));\n}\n' > "$tmp/big.tile"
expect 1 "a [2^20, 2^20] tile" -- "$kiln" compile --emit ptx -D A=1048576 -D B=1048576 "$tmp/big.tile"
contains "$tmp/err" "big.tile:2:13: error: this f32[1048576, 1048576] tile has 1099511627776 elements; a tile may have at most 1048576 (2^20)" "tile size message"
expect 1 "8192 registers a thread" -- "$kiln" compile --emit ptx -D A=1024 -D B=1024 "$tmp/big.tile"
contains "$tmp/err" "big.tile:2:13: error: this f32[1024, 1024] tile needs 8192 registers per thread with num_warps = 4" "registers message"
expect 0 "a [256, 256] store and reduce compile" -- timeout 60 "$kiln" compile --emit ptx -D A=256 -D B=256 "$tmp/big.tile"
printf 'kernel k(Y: *f32, const A: i32 = 4) {\n    store(Y, sum(zeros([A, A, A, A], f32)));\n}\n' > "$tmp/big4.tile"
expect 1 "a 4-D reduce of 65536 per axis" -- "$kiln" compile --emit ptx -D A=65536 "$tmp/big4.tile"
contains "$tmp/err" "big4.tile:2:18: error: this f32[65536, 65536, 65536, 65536] tile has more than 2^63 elements" "4-D message"

# -o (issue 29): never over the input file (by its name or another), and only for compile:
# check and run used to accept it and write nothing.
cp "$root/examples/vec_add.tile" "$tmp/self.tile"
expect 2 "-o names the input" -- "$kiln" compile --emit ptx -o "$tmp/self.tile" "$tmp/self.tile"
contains "$tmp/err" "names the input file" "-o over the input message"
ln -s "$tmp/self.tile" "$tmp/alias.tile"
expect 2 "-o names the input by another name" -- "$kiln" compile --emit ptx -o "$tmp/alias.tile" "$tmp/self.tile"
n=$((n+1)); cmp -s "$root/examples/vec_add.tile" "$tmp/self.tile" || { echo "FAIL: the input was overwritten"; fail=$((fail+1)); }
expect 2 "kiln run -o" -- "$kiln" run --cpu -o "$tmp/out.txt" "$root/examples/vec_add.tile"
contains "$tmp/err" "-o is for kiln compile; kiln run writes no output file" "run -o message"
expect 2 "kiln check -o" -- "$kiln" check -o "$tmp/out.txt" "$root/examples/vec_add.tile"

echo "$((n-fail)) passed, $fail failed"
[ $fail -eq 0 ]
