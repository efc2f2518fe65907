#!/bin/sh
# The kernels' copies per instruction set (aoc_isa_kernels, sim/isa.hpp) must share no code with the
# rest of the binary: an inline function or template instantiation left out of line in a copy is a
# weak symbol, and the linker may keep the AVX-512 copy's version for every caller, which then dies
# with an illegal instruction on a CPU without AVX-512. Every symbol a copy defines must be local
# or live in its own namespace (the exception tables' DW.ref pointer to the C++ runtime is data).
# Usage: isa_objects_test.sh OBJECT...
set -eu
[ $# -gt 0 ] || { echo "isa_objects_test: no objects given" >&2; exit 1; }
bad=0
for obj in "$@"; do
  case "$obj" in
    *_x86_64_v4*) ns=x86_64_v4 ;;
    *_x86_64_v3*) ns=x86_64_v3 ;;
    *_x86_64*) ns=x86_64 ;;
    *_generic*) ns=generic ;;
    *) echo "isa_objects_test: cannot tell the level of $obj" >&2; exit 1 ;;
  esac
  syms=$(nm -C --defined-only "$obj")
  # defined global or weak symbols (T, W, V, u, D, B, R), outside the copy's namespace
  out=$(printf '%s\n' "$syms" | awk -v ns="::$ns::" '$2 ~ /^[TWVuDBR]$/ && $3 !~ /^DW\.ref\./ { line = $0; sub(/^[^ ]+ [^ ]+ /, "", line); if (index(line, ns) == 0) print }')
  if [ -n "$out" ]; then
    echo "isa_objects_test: $obj ($ns) shares these with the rest of the binary:" >&2
    printf '%s\n' "$out" >&2
    bad=1
  fi
  n=$(printf '%s\n' "$syms" | awk -v ns="::$ns::" '$2 == "T" && index($0, ns) > 0' | wc -l)
  [ "$n" -gt 0 ] || { echo "isa_objects_test: $obj defines no function of namespace $ns" >&2; bad=1; }
done
[ $bad -eq 0 ] && echo "isa_objects_test: $# kernel copies, each self-contained"
exit $bad
