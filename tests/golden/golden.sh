#!/usr/bin/env bash
# Golden-output test of the shipped scenarios: runs one case and compares what it writes with the
# files under tests/golden/<case>/, byte for byte.
#
#   tests/golden/golden.sh SERVESIM SOURCE_DIR CASE            # check (exit 0 = identical, 77 = skipped)
#   tests/golden/golden.sh SERVESIM SOURCE_DIR CASE --update   # rewrite the golden files of CASE
#   tests/golden/golden.sh SERVESIM SOURCE_DIR all --update    # every case
#
# What is pinned: every summary.json verbatim (diffable), the stdout of step/plan/topology
# verbatim, and the SHA-256 of every requests.csv and timeline.json (hashes.txt). The absolute path
# of the shared traces folder is replaced by <traces>, and the source tree's by <src>, so the
# files do not depend on where the checkout lives. A deliberate change of behaviour updates these files in the same commit and says
# why in its message (README, "Tests").
#
# Cases that replay the shared public traces need them ($SERVESIM_SHARED_TRACES, else
# the configured -DSERVESIM_SHARED_TRACES, else SOURCE_DIR/../shared/traces); without them the case exits 77 (ctest: skipped).
set -euo pipefail
bin="$1"; src="$2"; case_name="$3"; mode="${4:-check}"
traces="${SERVESIM_SHARED_TRACES:-${SERVESIM_CONFIGURED_TRACES:-$src/../shared/traces}}"
[ -d "$traces" ] && traces="$(cd "$traces" && pwd)"
export SERVESIM_SHARED_TRACES="$traces"
src_abs="$(cd "$src" && pwd)"

cases="default tracelab-replay mooncake-60s agent-sessions-30s dsv3-step k2-step dsv3-profile-run dsv3-mtp-run dsv3-mtp128-step plan-default topology-default"

# the command line of each case (scenario paths relative to the source tree)
args_of() {
  case "$1" in
    default)            echo "run" ;;
    tracelab-replay)    echo "run scenarios/tracelab-replay.json" ;;
    mooncake-60s)       echo "run scenarios/mooncake-conversation.json --horizon 60" ;;
    agent-sessions-30s) echo "run scenarios/agent-sessions.json --horizon 30" ;;
    dsv3-step)          echo "step scenarios/dsv3-sglang-96xh100.json --phase prefill --seqs-per-rank 16 --tokens 1024" ;;
    k2-step)            echo "step scenarios/k2-sglang-128xh200.json --phase prefill --seqs-per-rank 8 --tokens 2000" ;;  # EPLB without redundant experts
    dsv3-profile-run)   echo "run scenarios/dsv3-deepseek-profile-h800.json" ;;  # H800 (extrapolated), balanced routing
    dsv3-mtp-run)       echo "run scenarios/dsv3-sglang-mtp-16xh200.json" ;;
    dsv3-mtp128-step)   echo "step scenarios/dsv3-sglang-mtp-128xh200.json --phase decode --seqs-per-rank 128 --context 2050" ;;  # MTP at 128 seq/rank
    plan-default)       echo "plan" ;;
    topology-default)   echo "topology" ;;
    *) echo "golden.sh: unknown case '$1' (cases: $cases)" >&2; exit 2 ;;
  esac
}
needs_traces() { case "$1" in tracelab-replay|mooncake-60s) return 0 ;; *) return 1 ;; esac; }

# writes the normalised outputs of case $1 into folder $2
produce() {
  local c="$1" dst="$2" args tmp
  args="$(args_of "$c")"
  tmp="$(mktemp -d)"
  mkdir -p "$dst"
  if [[ "$args" == run* ]]; then
    (cd "$src" && "$bin" $args --out "$tmp/out" --jobs 1 >"$tmp/stdout" 2>"$tmp/log") || { cat "$tmp/log" >&2; exit 1; }
    (cd "$tmp/out" && find . -name summary.json | sort) | while read -r f; do
      mkdir -p "$dst/$(dirname "$f")"
      sed -e "s#$traces#<traces>#g" -e "s#$src_abs/#<src>/#g" "$tmp/out/$f" >"$dst/$f"
    done
    (cd "$tmp/out" && find . \( -name requests.csv -o -name timeline.json \) | sort | xargs sha256sum) >"$dst/hashes.txt"
  else
    (cd "$src" && "$bin" $args >"$tmp/stdout" 2>"$tmp/log") || { cat "$tmp/log" >&2; exit 1; }
    sed -e "s#$traces#<traces>#g" -e "s#$src_abs/#<src>/#g" "$tmp/stdout" >"$dst/stdout.txt"
  fi
  rm -rf "$tmp"
}

run_case() {
  local c="$1" golden="$src/tests/golden/$1"
  if needs_traces "$c" && [ ! -d "$traces/mooncake" ]; then
    echo "skipped: shared traces not found at $traces"; return 77
  fi
  if [ "$mode" = "--update" ]; then
    rm -rf "$golden"; produce "$c" "$golden"; echo "updated $golden"; return 0
  fi
  [ -d "$golden" ] || { echo "no golden files for '$c' (run with --update)"; return 1; }
  local got; got="$(mktemp -d)"
  produce "$c" "$got"
  if diff -r -u "$golden" "$got" >"$got.diff"; then
    echo "golden '$c': identical"; rm -rf "$got" "$got.diff"; return 0
  fi
  echo "golden '$c': outputs differ from tests/golden/$c (a deliberate change updates them with --update in the same commit):"
  head -c 20000 "$got.diff"; echo  # (a cut line would otherwise swallow the next case's status line)
  rm -rf "$got" "$got.diff"
  return 1
}

if [ "$case_name" = all ]; then
  rc=0; for c in $cases; do run_case "$c" || { r=$?; [ $r -eq 77 ] || rc=1; }; done; exit $rc
fi
args_of "$case_name" >/dev/null
run_case "$case_name"
