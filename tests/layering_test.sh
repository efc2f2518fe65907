#!/usr/bin/env bash
# The build enforces the layering (docs/architecture.md): compiled with a layer's include directories
# (its own and those of the layers it links), a header of that layer is found and one of a layer above
# is not. tests/layering_test.sh CXX BUILD_DIR
set -euo pipefail
CXX=$1 BUILD=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# layer: the layers it may include (itself and below), then one header of a layer above it
check() {
  local layer=$1 below=$2 above=$3 flags=""
  for l in $below; do flags="$flags -I$BUILD/layers/$l"; done
  local own
  own=$(cd "$BUILD/layers/$layer/$layer" && find -L . -name '*.hpp' -not -path './cli/*' | sort | head -1 | sed 's|^\./||')
  printf '#include "%s/%s"\n' "$layer" "$own" > "$T/ok.cpp"
  if ! out=$("$CXX" -std=c++20 -fsyntax-only -E $flags -I/usr/include/eigen3 "$T/ok.cpp" -o /dev/null 2>&1); then
    echo "FAIL: $layer: its own header $layer/$own not found with its include directories"; echo "$out" | head -5; exit 1
  fi
  printf '#include "%s"\n' "$above" > "$T/up.cpp"
  if out=$("$CXX" -std=c++20 -E $flags "$T/up.cpp" -o /dev/null 2>&1); then
    echo "FAIL: $layer: $above (a layer above) is found with $layer's include directories"; exit 1
  fi
  case "$out" in *"No such file"*) ;; *) echo "FAIL: $layer: unexpected error: $out"; exit 1 ;; esac
  echo "ok: $layer cannot include $above"
}
check sim "sim" "compiler/ir.hpp"
check sim "sim" "runtime/backend/backend.hpp"
check compiler "sim compiler" "models/train.hpp"
check compiler "sim compiler" "runtime/backend/backend.hpp"
check models "sim compiler models" "runtime/backend/backend.hpp"
check runtime "sim compiler models runtime" "bench/loop_bench.hpp"
