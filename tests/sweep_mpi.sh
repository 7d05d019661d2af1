#!/usr/bin/env bash
# servesim sweep under MPI (README "Sweeps beyond one machine"): `mpirun -n 2` on localhost writes
# the same results table, byte for byte, as the single-process sweep; both ranks ran points (each
# point's run.log names its rank); resume runs nothing; ranks whose output folders are different
# folders (what ranks on nodes without a shared filesystem see) still give rank 0 every point's
# summary and the same table; a process alone in its MPI world while its launcher said 2 ranks
# exits 2; a bad grid exits 2 on every rank. Exit 77 (skipped) without mpirun
# or without the MPI helper (servesim built without MPI).
#   tests/sweep_mpi.sh BUILD/servesim SOURCE_DIR
set -uo pipefail
bin=$(realpath "$1") src=$(realpath "$2")
mpirun=$(command -v mpirun || true)
if [ -z "$mpirun" ]; then echo "skipped: no mpirun (apt-get install openmpi-bin libopenmpi-dev)"; exit 77; fi
if [ ! -x "$(dirname "$bin")/servesim-mpi-sweep" ]; then echo "skipped: servesim built without MPI (no servesim-mpi-sweep)"; exit 77; fi
opts=(--oversubscribe)
[ "$(id -u)" -eq 0 ] && opts+=(--allow-run-as-root)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none  # no network or ptrace needed on one host
d=$(mktemp -d /tmp/servesim-sweep-mpi.XXXXXX)
trap '[ "${KEEP:-}" ] || rm -rf "$d"' EXIT
grid=$src/scenarios/sweeps/default-batch-rate.json
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }

"$bin" sweep "$grid" --out "$d/single" --jobs 1 > "$d/single.log" 2>&1 || { cat "$d/single.log"; echo "FAIL: single-process sweep"; exit 1; }
"$mpirun" "${opts[@]}" -n 2 "$bin" sweep "$grid" --out "$d/mpi" --jobs 1 > "$d/mpi.log" 2>&1
check "mpirun -n 2 exits 0" "[ $? -eq 0 ]"
check "the log says 2 MPI ranks" "grep -q 'on each of 2 MPI ranks' '$d/mpi.log'"
check "results.csv byte-identical to the single-process run's" "cmp '$d/single/results.csv' '$d/mpi/results.csv'"
check "results.json byte-identical to the single-process run's" "cmp '$d/single/results.json' '$d/mpi/results.json'"
check "6 rows + header" "[ \$(wc -l < '$d/mpi/results.csv') -eq 7 ]"
check "rank 0 ran points" "grep -l 'MPI rank 0' '$d'/mpi/points/*/run.log >/dev/null"
check "rank 1 ran points" "grep -l 'MPI rank 1' '$d'/mpi/points/*/run.log >/dev/null"
"$mpirun" "${opts[@]}" -n 2 "$bin" sweep "$grid" --out "$d/mpi" --jobs 1 > "$d/resume.log" 2>&1
check "resume under mpirun: exit 0, 6 resumed" "grep -q '6/6 points done (6 resumed, 0 failed)' '$d/resume.log'"
check "resume: the table unchanged" "cmp '$d/single/results.csv' '$d/mpi/results.csv' && cmp '$d/single/results.json' '$d/mpi/results.json'"

# Two ranks, two working directories: rank 1's --out is not rank 0's (no shared filesystem).
mkdir -p "$d/node0" "$d/node1"
"$mpirun" "${opts[@]}" -n 1 -wdir "$d/node0" "$bin" sweep "$grid" --out out --jobs 1 : \
                       -n 1 -wdir "$d/node1" "$bin" sweep "$grid" --out out --jobs 1 > "$d/split.log" 2>&1
check "separate folders: exit 0" "[ $? -eq 0 ]"
check "separate folders: rank 1 ran points in its own folder" "ls '$d'/node1/out/points/p000* >/dev/null 2>&1"
check "separate folders: rank 0's table byte-identical" "cmp '$d/single/results.csv' '$d/node0/out/results.csv' && cmp '$d/single/results.json' '$d/node0/out/results.json'"
check "separate folders: rank 0 holds all 6 summaries" "[ \$(ls '$d'/node0/out/points/*/summary.json | wc -l) -eq 6 ]"
"$bin" sweep "$grid" --out "$d/node0/out" --jobs 1 > "$d/split-resume.log" 2>&1
check "separate folders: a single-process resume from rank 0's folder runs nothing" "grep -q '(6 resumed, 0 failed)' '$d/split-resume.log'"

# The ranks come from MPI_Comm_size, not from the launcher's variables: a process whose launcher
# says 2 ranks but that is alone in its MPI world (srun with a PMI plugin this OpenMPI does not
# speak, on a cluster) refuses with exit 2 instead of running the whole grid as if it were rank 0.
timeout 120 env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$bin" sweep "$grid" --out "$d/lone" --jobs 1 > "$d/lone.log" 2>&1
st=$?
check "alone in its MPI world though the launcher said 2 ranks: exit 2" "[ $st -eq 2 ] && grep -q 'MPI_Comm_size says 1' '$d/lone.log'"
check "  and no point was run" "! ls '$d'/lone/points/p000* >/dev/null 2>&1"

# A grid naming a field the scenario lacks: every rank exits 2, rank 0 names the field.
printf '{"scenario": "%s/scenarios/default.json", "grid": {"deployments.0.decode.no_such": [1]}}\n' "$src" > "$d/bad.json"
"$mpirun" "${opts[@]}" -n 2 "$bin" sweep "$d/bad.json" --out "$d/bad" > "$d/bad.log" 2>&1
st=$?
check "bad grid under mpirun: non-zero exit" "[ $st -ne 0 ]"
check "bad grid: the error names the field" "grep -q 'deployments.0.decode.no_such' '$d/bad.log'"
[ $fail -eq 0 ] && echo "sweep under MPI: all checks passed" || { echo "--- mpi.log"; cat "$d/mpi.log"; }
exit $fail
