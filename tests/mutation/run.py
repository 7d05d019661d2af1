#!/usr/bin/env python3
"""servesim mutation campaign (issue 18): plant each one-line bug of mutations.txt in a scratch
copy of the tree, rebuild incrementally, run the test suite, record killed / survived /
build-failed, put the line back. Prints the score and the survivors and writes last-results.md.

  tests/mutation/run.py                      # every mutation
  tests/mutation/run.py --only M03,M15       # some of them
  tests/mutation/run.py --resume             # skip the ones already in the work dir's state file

See tests/mutation/README.md.
"""
import argparse
import datetime
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SKIP_DIRS = {".git", "out"}


def parse_mutations(path):
    muts, cur = [], None
    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        if line.startswith("## "):
            m = re.match(r"## (\S+) (.*)$", line)
            cur = {"id": m.group(1), "what": m.group(2)}
            muts.append(cur)
        elif cur is not None and re.match(r"(file|find|repl): ", line):
            key, val = line.split(": ", 1)
            cur[key] = val.replace("\\n", "\n") if key != "file" else val
    for m in muts:
        for k in ("file", "find", "repl"):
            if k not in m:
                sys.exit(f"mutations.txt: {m['id']} has no '{k}:' line")
    return muts


def sync_tree(src, dst):
    """Make dst a copy of src's working tree (no .git, build*, out): files copied only where their
    content differs, so an unchanged file keeps its time stamp and the next build stays incremental."""
    seen = set()
    for d, dirs, files in os.walk(src):
        rel = os.path.relpath(d, src)
        dirs[:] = [x for x in dirs if not (rel == "." and (x in SKIP_DIRS or x.startswith("build")))]
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in files:
            s, t = os.path.join(d, f), os.path.normpath(os.path.join(dst, rel, f))
            seen.add(t)
            if os.path.islink(s):
                continue
            if not os.path.exists(t) or not filecmp.cmp(s, t, shallow=False):
                shutil.copy2(s, t)
                os.utime(t)  # newer than any object built from the old copy
    for d, dirs, files in os.walk(dst):
        for f in files:
            p = os.path.normpath(os.path.join(d, f))
            if p not in seen:
                os.remove(p)


def sh(cmd, log, timeout=None, cwd=None):
    with open(log, "w") as out:
        try:
            return subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout, cwd=cwd).returncode
        except subprocess.TimeoutExpired:
            return 124


def build(a, log):
    return sh(["flock", a.lock, "cmake", "--build", a.build, "-j", str(a.jobs)], log, timeout=3600)


def ctest(a, log, stop):
    cmd = ["ctest", "--test-dir", a.build, "-j", str(a.jobs), "--output-on-failure"]
    if a.exclude:
        cmd += ["-E", a.exclude]
    if stop:
        cmd += ["--stop-on-failure"]
    rc = sh(cmd, log, timeout=a.test_timeout)
    failed = []
    try:
        txt = open(log, encoding="utf-8", errors="replace").read()
        # "  12 - Numbers.Foo (Failed)" lines of ctest's summary, or "***Failed"/"Timeout" progress lines
        failed = re.findall(r"^\s*\d+ - (\S+) \((?:Failed|Timeout|SEGFAULT|Subprocess aborted|Exception|Child aborted)[^)]*\)", txt, re.M)
        if not failed:
            failed = re.findall(r"Test\s+#\d+: (\S+) \.+\**\s*(?:Failed|Timeout|Exception|Subprocess)", txt)
    except OSError:
        pass
    return rc, failed


def write_results(a, muts, state, path):
    done = [m for m in muts if m["id"] in state]
    killed = [m for m in done if state[m["id"]]["result"] == "killed"]
    survived = [m for m in done if state[m["id"]]["result"] == "survived"]
    bfail = [m for m in done if state[m["id"]]["result"] == "build-failed"]
    napp = [m for m in done if state[m["id"]]["result"] == "not-applied"]
    scored = len(killed) + len(survived)
    score = 100.0 * len(killed) / scored if scored else 0.0
    notes = {}
    if os.path.exists(a.notes):
        for line in open(a.notes, encoding="utf-8"):
            m = re.match(r"(M\d+)\s*:\s*(.*)", line.strip())
            if m:
                notes[m.group(1)] = m.group(2)
    L = []
    L.append("# Mutation campaign: last results\n")
    L.append(f"Written by `tests/mutation/run.py` on {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC "
             f"from the tree at `{a.src_commit}`; suite: `ctest -E '{a.exclude}'`.\n")
    L.append(f"**Score: {len(killed)} killed of {scored} that built and ran = {score:.1f}%** "
             f"({len(muts)} mutations listed, {len(done)} run; {len(survived)} survived, {len(bfail)} failed to build, "
             f"{len(napp)} not applied because the line has changed).\n")
    if survived:
        L.append("## Survivors\n")
        for m in survived:
            L.append(f"- **{m['id']}** {m['what']} (`{m['file']}`): {notes.get(m['id'], 'NO REASON RECORDED: a missing test?')}")
        L.append("")
    L.append("## Every mutation\n")
    L.append("| id | what | file | result | first failing tests | s |")
    L.append("|---|---|---|---|---|---|")
    for m in muts:
        s = state.get(m["id"])
        if not s:
            L.append(f"| {m['id']} | {m['what']} | `{m['file']}` | not run | | |")
            continue
        kt = ", ".join(s.get("failed", [])[:3])
        L.append(f"| {m['id']} | {m['what'].replace('|', '/')} | `{m['file']}` | {s['result']} | {kt} | {s.get('seconds', 0):.0f} |")
    open(path, "w", encoding="utf-8").write("\n".join(L) + "\n")
    return killed, survived, bfail, napp, score


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", default="/tmp/mut", help="scratch folder: WORK/src (the copy), WORK/build, WORK/logs")
    p.add_argument("--only", default="", help="comma-separated mutation ids")
    p.add_argument("--resume", action="store_true", help="skip mutations already recorded in WORK/state.json")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--lock", default="/tmp/servesim-build.lock", help="every build runs under flock on this file")
    p.add_argument("--exclude", default="HeldOut|Fit\\.CommittedParameters",
                   help="ctest -E regex (default: the two slow fit tests; no mutation touches the fit)")
    p.add_argument("--test-timeout", type=int, default=1200, help="seconds for one suite run (a hang counts as killed)")
    p.add_argument("--mutations", default=os.path.join(HERE, "mutations.txt"))
    p.add_argument("--notes", default=os.path.join(HERE, "survivors.txt"), help="'Mxx: reason' lines for survivors")
    p.add_argument("--results", default=os.path.join(HERE, "last-results.md"))
    p.add_argument("--all-failures", action="store_true", help="run the whole suite per mutation (no --stop-on-failure): lists every test that kills it")
    p.add_argument("--worktree", action="store_true", help="copy the working tree as it is instead of HEAD + tests/")
    p.add_argument("--head", action="store_true", help="copy the committed tree only (no working-tree tests/ over it): for a checkout others are editing")
    p.add_argument("--no-baseline", action="store_true", help="skip the clean build + suite run (only when it just passed)")
    a = p.parse_args()

    muts = parse_mutations(a.mutations)
    ids = [m["id"] for m in muts]
    if len(set(ids)) != len(ids):
        sys.exit("mutations.txt: duplicate ids")
    only = [x for x in a.only.split(",") if x]
    todo = [m for m in muts if not only or m["id"] in only]

    a.work = os.path.abspath(a.work)
    src, a.build, logs = os.path.join(a.work, "src"), os.path.join(a.work, "build"), os.path.join(a.work, "logs")
    os.makedirs(logs, exist_ok=True)
    try:
        a.src_commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "?"
        if a.head:
            a.src_commit += " (committed tree only)"
        elif subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip():
            a.src_commit += " + uncommitted changes"
    except OSError:
        a.src_commit = "?"

    if a.worktree:
        print(f"[mut] copying the working tree {ROOT} -> {src} (changed files only)", flush=True)
        sync_tree(ROOT, src)
    else:
        # the committed tree (others' uncommitted work in a shared checkout would move the golden
        # outputs), with the working tree's tests/ over it (not tests/golden/: those go with HEAD)
        head = os.path.join(a.work, "head")
        shutil.rmtree(head, ignore_errors=True)
        os.makedirs(head)
        subprocess.run(f"git -C '{ROOT}' archive HEAD | tar -x -C '{head}'", shell=True, check=True)
        for d, dirs, files in ([] if a.head else os.walk(os.path.join(ROOT, "tests"))):
            rel = os.path.relpath(d, ROOT)
            if rel.startswith(os.path.join("tests", "golden")):
                continue
            os.makedirs(os.path.join(head, rel), exist_ok=True)
            for f in files:
                shutil.copy2(os.path.join(d, f), os.path.join(head, rel, f))
        print(f"[mut] copying HEAD{'' if a.head else ' + the working tree' + chr(39) + 's tests/'} -> {src} (changed files only)", flush=True)
        sync_tree(head, src)
    if not os.path.exists(os.path.join(a.build, "CMakeCache.txt")):
        traces = os.path.normpath(os.path.join(ROOT, "..", "shared", "traces"))
        cfg = ["cmake", "-S", src, "-B", a.build, "-DSERVESIM_KERNELS=OFF", "-DCMAKE_BUILD_TYPE=Release",
               f"-DSERVESIM_SHARED_TRACES={traces}"]
        if shutil.which("ninja"):
            cfg += ["-G", "Ninja"]
        if shutil.which("ccache"):
            cfg += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        if shutil.which("ld.lld"):  # every mutation relinks ~20 test programs: lld is several times faster than ld.bfd
            cfg += ["-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld"]
        if sh(cfg, os.path.join(logs, "configure.log")) != 0:
            sys.exit(f"[mut] configure failed: {logs}/configure.log")

    state_path = os.path.join(a.work, "state.json")
    state = json.load(open(state_path)) if (a.resume and os.path.exists(state_path)) else {}

    # Every mutation's text must be found exactly once before anything runs.
    for m in todo:
        f = os.path.join(src, m["file"])
        n = open(f, encoding="utf-8").read().count(m["find"]) if os.path.exists(f) else 0
        if n != 1:
            print(f"[mut] {m['id']}: pattern found {n} times in {m['file']}: recorded as not-applied", flush=True)
            state[m["id"]] = {"result": "not-applied", "failed": [f"pattern x{n}"], "seconds": 0}
        elif state.get(m["id"], {}).get("result") == "not-applied":
            del state[m["id"]]  # applies now: run it
    if not a.no_baseline:
        print("[mut] baseline: build + suite on the clean copy", flush=True)
        if build(a, os.path.join(logs, "baseline-build.log")) != 0:
            sys.exit(f"[mut] the clean copy does not build: {logs}/baseline-build.log")
        rc, failed = ctest(a, os.path.join(logs, "baseline-ctest.log"), stop=False)
        if rc != 0:
            sys.exit(f"[mut] the suite fails on the clean copy ({', '.join(failed)}): {logs}/baseline-ctest.log. "
                     "Pull the newest tree (rerun; changed files are copied again) before a campaign.")

    for i, m in enumerate(todo):
        if m["id"] in state and (a.resume or state[m["id"]]["result"] == "not-applied"):
            continue
        f = os.path.join(src, m["file"])
        orig = open(f, encoding="utf-8").read()
        t0 = time.time()
        open(f, "w", encoding="utf-8").write(orig.replace(m["find"], m["repl"], 1))
        try:
            blog = os.path.join(logs, f"{m['id']}-build.log")
            if build(a, blog) != 0:
                res, failed = "build-failed", []
            else:
                rc, failed = ctest(a, os.path.join(logs, f"{m['id']}-ctest.log"), stop=not a.all_failures)
                res = "killed" if rc != 0 else "survived"
        finally:
            open(f, "w", encoding="utf-8").write(orig)  # new time stamp: the next build recompiles it (ccache hit)
        state[m["id"]] = {"result": res, "failed": failed, "seconds": time.time() - t0}
        json.dump(state, open(state_path, "w"), indent=1)
        print(f"[mut] {i + 1}/{len(todo)} {m['id']} {res:12s} {time.time() - t0:5.0f} s  {m['what']}"
              + (f"  <- {', '.join(failed[:2])}" if failed else ""), flush=True)
        write_results(a, muts, state, a.results)

    build(a, os.path.join(logs, "restore-build.log"))  # leave the scratch build clean
    killed, survived, bfail, napp, score = write_results(a, muts, state, a.results)
    print(f"\n[mut] score: {len(killed)}/{len(killed) + len(survived)} killed = {score:.1f}% "
          f"({len(bfail)} build-failed, {len(napp)} not applied)")
    for m in survived:
        print(f"[mut] survivor {m['id']}: {m['what']} ({m['file']})")
    print(f"[mut] results: {a.results}")


if __name__ == "__main__":
    main()
