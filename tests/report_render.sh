#!/usr/bin/env bash
# The sweep report renders in a real browser (ctest: report_renders_in_chromium). Two sweeps (a tiny
# run of the trained parity model with failing points, and an estimates-only one) go through
# `aoc report`; each page must be well-formed SVG (python3's XML parser), and headless Chromium
# must lay out every plot with a nonzero size (the page's own check writes data-plots-rendered), meet
# no error (data-render-errors, and no console message: a bad SVG attribute or a script error is
# logged there) and take a non-trivial screenshot.
# Exit 77 (ctest: skipped) when Chromium is not installed: scripts/install-deps installs it.
#   tests/report_render.sh build/aoc
set -euo pipefail
AOC=$(realpath "${1:-build/aoc}")
cd "$(dirname "$0")/.."
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$CHROMIUM" ]; then
  echo "SKIPPED: chromium is not installed (apt-get install chromium; scripts/install-deps does)"
  exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

chrome() {  # a fresh profile each time, nothing reaches the network
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --disable-extensions --enable-logging=stderr --v=0 \
    --user-data-dir="$(mktemp -d "$T/profile.XXXX")" "$@"
}

# check NAME SCENARIO PLOTS: sweep, report, and the browser's view of it
check() {
  local name=$1 scenario=$2 want=$3
  "$AOC" sweep "$scenario" -o "$T/$name.h5" --quiet > /dev/null
  "$AOC" report "$T/$name.h5" -o "$T/$name.html" > "$T/$name.txt"
  python3 - "$T/$name.html" "$want" <<'EOF'
import re, sys, xml.etree.ElementTree as ET
html, want = open(sys.argv[1], encoding="utf-8").read(), int(sys.argv[2])
svgs = re.findall(r"<svg class=\"plot\".*?</svg>", html, re.S)
for s in svgs:
    ET.fromstring(s)  # raises on malformed SVG
assert len(svgs) == want, f"{sys.argv[1]}: {len(svgs)} plots, expected {want}"
assert f'data-plots="{want}"' in html
assert "http://" not in html.replace("http://www.w3.org/2000/svg", ""), "a network reference"
EOF
  chrome --dump-dom "file://$T/$name.html" > "$T/$name.dom" 2> "$T/$name.log"
  local drawn errors
  drawn=$(grep -o 'data-plots-rendered="[0-9]*"' "$T/$name.dom" | grep -o '[0-9]*' || true)
  errors=$(grep -o 'data-render-errors="[0-9]*"' "$T/$name.dom" | grep -o '[0-9]*' || true)
  if [ "$drawn" != "$want" ] || [ "$errors" != "0" ]; then
    echo "FAIL: $name: chromium drew ${drawn:-no} of $want plots, ${errors:-unknown} render errors"
    grep CONSOLE "$T/$name.log" || true
    exit 1
  fi
  if grep -q ':CONSOLE' "$T/$name.log"; then
    echo "FAIL: $name: the browser's console:"
    grep ':CONSOLE' "$T/$name.log"
    exit 1
  fi
  chrome --screenshot="$T/$name.png" --window-size=1200,1600 --hide-scrollbars "file://$T/$name.html" > /dev/null 2>&1
  local size
  size=$(stat -c %s "$T/$name.png")
  if [ "$(head -c 4 "$T/$name.png" | tail -c 3)" != "PNG" ] || [ "$size" -lt 30000 ]; then
    echo "FAIL: $name: the screenshot is missing or nearly blank ($size bytes)"
    exit 1
  fi
  echo "ok: $name: $want plots drawn by $("$CHROMIUM" --version 2>/dev/null | head -1), no errors; screenshot $size bytes"
}

start=$(date +%s)
# 8: the energy chart has no 'without' companion since no component is over 90 % of it (the
# electronics are billed through the weight reloads beside the SLMs' static power)
check parity tests/data/sweeps/report-parity.json 8
check cores scenarios/sweeps/mamba2-1.3b-cores.json 5
grep -q 'absent Accuracy' "$T/cores.txt" || { echo "FAIL: cores: the accuracy plot is not noted as absent"; cat "$T/cores.txt"; exit 1; }
echo "report renders in chromium: $(($(date +%s) - start)) s"
