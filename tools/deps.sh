#!/usr/bin/env bash
# Install what Kiln needs to build and test, when it is missing (Debian 12, as root).
set -euo pipefail
pkgs=(build-essential cmake pkg-config flex bison check llvm-19-dev libzstd-dev zlib1g-dev python3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# clang-14 and its sanitizer runtime for the libFuzzer target (optional for the main job).
if [ "${KILN_WANT_FUZZ:-0}" = 1 ]; then
  for p in clang-14 libclang-rt-14-dev; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
