#!/usr/bin/env bash
# servesim report in headless Chromium (README "servesim report"): the report of a run (the default
# scenario with its timeline) and of a sweep (scenarios/sweeps/default-batch-rate.json) opened from
# file:// with the network off; every chart the page lists drew (pixels painted and data points),
# no uncaught error or console.error, no reference outside the file; a screenshot of each is kept
# in OUT. Exit 77 (skipped) without Chromium (apt-get install chromium).
#   tests/report_chromium.sh BUILD/servesim SOURCE_DIR OUT
set -uo pipefail
bin=$(realpath "$1") src=$(realpath "$2") out=$3
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$chromium" ]; then echo "skipped: no chromium (apt-get install chromium)"; exit 77; fi
mkdir -p "$out"
d=$(mktemp -d /tmp/servesim-report.XXXXXX)
trap '[ "${KEEP:-}" ] || rm -rf "$d"' EXIT
fail=0
"$bin" run "$src/scenarios/default.json" --out "$d/run" --jobs 2 > "$d/run.log" 2>&1 || { cat "$d/run.log"; echo "FAIL: run"; exit 1; }
"$bin" sweep "$src/scenarios/sweeps/default-batch-rate.json" --out "$d/sweep" > "$d/sweep.log" 2>&1 || { cat "$d/sweep.log"; echo "FAIL: sweep"; exit 1; }
flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-extensions --hide-scrollbars --mute-audio
       --proxy-server=127.0.0.1:9 --proxy-bypass-list='<-loopback>' --user-data-dir="$d/profile")
for kind in run sweep; do
  "$bin" report "$d/$kind" --out "$d/$kind.html" > "$d/$kind-report.log" 2>&1 || { cat "$d/$kind-report.log"; echo "FAIL: report $kind"; fail=1; continue; }
  if grep -Eqi '<(script|link|img|iframe)[^>]*(src|href)=' "$d/$kind.html"; then echo "FAIL: $kind.html loads something from outside"; fail=1; fi
  timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$d/$kind.html" > "$d/$kind.dom" 2> "$d/$kind.chromium.log"
  timeout 120 "$chromium" "${flags[@]}" --window-size=1100,9000 --screenshot="$out/report-$kind.png" "file://$d/$kind.html" >> "$d/$kind.chromium.log" 2>&1
  python3 - "$d/$kind.dom" "$kind" <<'EOF' || fail=1
import html, json, re, sys
dom, kind = open(sys.argv[1], encoding='utf-8').read(), sys.argv[2]
m = re.search(r'<pre id="selfcheck">(.*?)</pre>', dom, re.S)
if not m or not m.group(1).strip():
    sys.exit(f'FAIL: {kind}: the page wrote no self-check (its script did not run)')
c = json.loads(html.unescape(m.group(1)))
bad = [r for r in c['charts'] if not r['drawn']]
print(f"{kind}: {len(c['charts'])} of {c['expected']} charts drawn checked, errors {c['errors']}")
for r in c['charts']:
    print(f"  {r['id']}: {r['painted']} pixels painted, {r['points']} data points")
if c['expected'] < 3 or len(c['charts']) != c['expected'] or bad or c['errors']:
    sys.exit(f'FAIL: {kind}: undrawn {[r["id"] for r in bad]}, errors {c["errors"]}')
EOF
  if grep -E 'CONSOLE.*(Uncaught|Error)' "$d/$kind.chromium.log"; then echo "FAIL: $kind: console error"; fail=1; fi
  [ -s "$out/report-$kind.png" ] && echo "screenshot: $out/report-$kind.png" || { echo "FAIL: no screenshot of $kind"; fail=1; }
done
[ $fail -eq 0 ] && echo "report in chromium: all checks passed"
exit $fail
