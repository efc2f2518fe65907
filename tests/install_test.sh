#!/usr/bin/env bash
# An installed aoc (cmake --install into a fresh prefix) runs from its own tree: it finds the data
# installed beside it (PREFIX/share/aoc), not the source tree it was built from; the installed
# Python package imports and finds the same data; a project of one's own (tests/package) builds
# with find_package(aoc) and gets what aoc loop gets. Usage: install_test.sh BUILD_DIR
set -euo pipefail
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null
moved="$prefix/moved"  # the installed tree moved elsewhere: still self-contained
mkdir "$moved" && mv "$prefix/bin" "$prefix/share" "$prefix/lib" "$prefix/include" "$moved/"
out=$("$moved/bin/aoc" hw list)
echo "$out" | grep -q "in $moved/share/aoc/scenarios/hardware" || { echo "aoc hw list did not read the installed data:"; echo "$out"; exit 1; }
"$moved/bin/aoc" verify-dt | tail -1
shown=$("$moved/bin/aoc" hw show aoc-48)  # captured first: grep -q closing the pipe early would fail the run under pipefail
echo "$shown" | grep -q "^file  *$moved/share/aoc/scenarios/hardware/aoc-48.json" || { echo "hw show: not the installed file:"; echo "$shown" | head -4; exit 1; }
listed=$("$moved/bin/aoc" list)  # the installed trained models and scenarios, from the installed tree
for want in "($moved/share/aoc/models/trained)" "parity-implicit " "($moved/share/aoc/scenarios/sweeps)" "demo.json"; do
  case "$listed" in *"$want"*) ;; *) echo "list: '$want' missing:"; echo "$listed" | head -20; exit 1 ;; esac
done
if [ -d "$moved/lib/python3/dist-packages/aocsim" ]; then
  PYTHONPATH="$moved/lib/python3/dist-packages" /usr/bin/python3 -c "
import aocsim, sys
path = aocsim.Hardware('aoc-16').path
assert path.startswith('$moved/share/aoc/'), path
print('python: aocsim', aocsim.__version__, 'from', aocsim.__file__, 'reads', path)
"
fi
# find_package(aoc) from a project of one's own, built against the moved prefix
cmake -S "$(dirname "$0")/package" -B "$prefix/consumer" -DCMAKE_PREFIX_PATH="$moved" -DCMAKE_BUILD_TYPE=Release > "$prefix/consumer.log" 2>&1 ||
  { cat "$prefix/consumer.log"; exit 1; }
cmake --build "$prefix/consumer" > "$prefix/consumer-build.log" 2>&1 || { cat "$prefix/consumer-build.log"; exit 1; }
used=$("$prefix/consumer/uses_aoc")
echo "$used"
want=$("$moved/bin/aoc" loop --hw aoc-16 --batch 4 --seed 1 --noise --quantize --json | /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['digest'])")
[ "$used" = "aoc-16: 4 samples, fixed points $want" ] || { echo "find_package(aoc): expected the digest of aoc loop, $want"; exit 1; }
echo "installed aoc runs from $moved; find_package(aoc) links it"
