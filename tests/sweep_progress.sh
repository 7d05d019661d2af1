#!/usr/bin/env bash
# servesim sweep's progress bar: on a terminal (a pseudo-terminal from script(1)) stderr redraws one
# line in place ("\r") with a bar, done/total and an ETA, ending at 6/6; off a terminal no progress
# line is written (only the first line). Exit 77 (skipped) without script(1) (util-linux).
#   tests/sweep_progress.sh BUILD/servesim SOURCE_DIR
set -uo pipefail
bin=$(realpath "$1") src=$(realpath "$2")
command -v script >/dev/null || { echo "skipped: no script(1)"; exit 77; }
d=$(mktemp -d /tmp/servesim-sweep-progress.XXXXXX)
trap 'rm -rf "$d"' EXIT
grid=$src/scenarios/sweeps/default-batch-rate.json
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
script -qec "$bin sweep $grid --out $d/tty --jobs 2" /dev/null > "$d/tty.log" 2>&1
check "on a terminal: exit 0" "[ $? -eq 0 ]"
check "on a terminal: the line is redrawn in place" "grep -q \$'\\r'sweep: '$d/tty.log'"
check "on a terminal: a bar and an ETA" "grep -aq 'ETA' '$d/tty.log' && grep -aq '\\[#' '$d/tty.log'"
check "on a terminal: it reaches 6/6 with a full bar" "grep -aq '\\[########################\\] 6/6 points' '$d/tty.log'"
"$bin" sweep "$grid" --out "$d/pipe" --jobs 2 > "$d/pipe.out" 2> "$d/pipe.err"
check "off a terminal: exit 0" "[ $? -eq 0 ]"
check "off a terminal: no progress line on stderr" "! grep -q 'ETA' '$d/pipe.err' && [ \$(wc -l < '$d/pipe.err') -eq 1 ]"
check "off a terminal: the closing line on stdout" "grep -q '6/6 points done (0 resumed, 0 failed)' '$d/pipe.out'"
[ $fail -eq 0 ] && echo "sweep progress: all checks passed" || cat "$d/tty.log" "$d/pipe.err"
exit $fail
