#!/usr/bin/env bash
# Speed benchmark (issue 15): runs scenarios one at a time (--jobs 1) under /usr/bin/time -v and
# prints, per scenario, wall time, peak RSS, simulated seconds per wall second and the run's
# request counts. Not a timed test: the figures depend on the machine and how loaded it is (the
# load average is printed with them).
#
#   bench/run.sh [-b SERVESIM] [SCENARIO.json ...]     default: bench/scenarios/*.json
#   bench/run.sh -b build-speed/servesim series        the size series (bench/series.sh)
#
# Each line: scenario, deployment, nodes, wall_s, rss_mib, sim_s_per_wall_s, arrived, completed.
# Outputs go to a temporary folder that is removed (set KEEP=1 to keep it and print its path).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/.." && pwd)"
bin="$src/build/servesim"
if [ "${1:-}" = "-b" ]; then bin="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2; fi
[ -x "$bin" ] || { echo "bench/run.sh: no servesim at $bin (build it, or pass -b PATH)" >&2; exit 2; }
if [ "${1:-}" = "series" ]; then shift; exec "$here/series.sh" "$bin" "$@"; fi
[ $# -gt 0 ] || set -- "$here"/scenarios/*.json

# one scenario: prints its result line (and the child's log on failure)
bench_one() {
  local scn="$1" tmp log horizon nodes dep wall rss line
  tmp="$(mktemp -d)"
  log="$tmp/log"
  if ! (cd "$src" && /usr/bin/time -v "$bin" run "$scn" --out "$tmp/out" --jobs 1 ${EXTRA_ARGS:-}) >"$tmp/stdout" 2>"$log"; then
    cat "$log" >&2; rm -rf "$tmp"; return 1
  fi
  wall="$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$log")"
  rss="$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$log")"
  horizon="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("horizon_s", 0))' "$scn")"
  # nodes the deployments need (8 GPUs a node, each pool from a node boundary; one deployment per scenario here)
  nodes="$(python3 -c 'import json,sys; j = json.load(open(sys.argv[1]))
print(" ".join(str(sum(-(-d[k]["instances"] * d[k]["ep"] // 8) for k in ("prefill", "decode"))) for d in j["deployments"]))' "$scn")"
  # the child's log line: "<dep>: simulated S s in W s of wall time ...; A arrived, C completed, ..."
  line="$(cat "$tmp/stdout" "$log" | grep -m1 "simulated .* of wall time" || true)"
  dep="$(sed -E 's/.*\] ([^:]+): simulated.*/\1/' <<<"$line")"
  local sim_s arrived completed
  sim_s="$(sed -E 's/.*simulated ([0-9.]+) s in.*/\1/' <<<"$line")"
  arrived="$(sed -E 's/.*; ([0-9]+) arrived.*/\1/' <<<"$line")"
  completed="$(sed -E 's/.* ([0-9]+) completed.*/\1/' <<<"$line")"
  [ "$horizon" != 0 ] || horizon="$sim_s"
  printf '%-22s %-11s %5s %8.2f %7s %9.1f %9s %9s\n' "$(basename "$scn" .json)" "$dep" "${nodes:--}" "$wall" "$rss" \
    "$(awk -v h="$horizon" -v w="$wall" 'BEGIN { print (w > 0 ? h / w : 0) }')" "$arrived" "$completed"
  if [ -n "${KEEP:-}" ]; then echo "  kept: $tmp" >&2; else rm -rf "$tmp"; fi
}

echo "# $(date -u +%FT%TZ) $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?') on $(nproc) cores; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %-11s %5s %8s %7s %9s %9s %9s\n' scenario deployment nodes wall_s rss_mib sim/wall arrived completed
for scn in "$@"; do
  scn="$(cd "$(dirname "$scn")" && pwd)/$(basename "$scn")"
  bench_one "$scn"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
