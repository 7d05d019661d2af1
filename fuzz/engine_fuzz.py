#!/usr/bin/env python3
"""Engine fuzz (issue 16): random small valid scenarios run through `servesim run`, twice each,
and the engine's invariants checked on what the user reads.

A seeded generator builds each scenario from a deployment of a shipped scenario (a layout known to
fit) with its knobs redrawn (hardware, instances, batch limits, chunking, two-batch overlap,
dispatch, routers and schedulers, prefix cache, KV tiers, MTP, attention TP where the model allows
it) and a small random workload (synthetic open loop, closed-loop agent sessions, or a slice of a
shared trace when ../shared/traces is there), run for a few simulated seconds. Each scenario runs
twice. A finding is:

  - an exit status other than 0, or 2 with an error message naming a field (a layout the
    generator drew that does not fit is refused cleanly: counted, not a finding);
  - a crash, a hang past --timeout seconds;
  - the two runs' output folders differing in any byte;
  - a broken invariant (check_deployment): every request accounted (arrived = completed +
    rejected + in flight, one requests.csv row each, per-status counts equal, every rejection with
    a reason), no negative or non-finite time, the request's times in order (arrival <= admit <=
    prefill <= transfer <= first token <= done <= horizon), TTFT = first token - arrival,
    completed requests with all their output tokens, no negative latency percentile, KV peak
    within the KV budget and HBM peak within the usable HBM, the KV-tier ledger balanced
    (into store = held at end + left the store; copies started >= into store + abandoned), and no
    KV transfer faster than its route allows (bytes / duration <= the TP group's aggregate NVLink
    or NIC rate).

Usage:
  fuzz/engine_fuzz.py --servesim build-sim/servesim --count 1000 [--seed 1] [--work /tmp/efuzz]
Exit status 0 when every scenario passed, 1 on a finding (its scenario is kept in
WORK/findings/), 2 on bad arguments.
"""
import argparse
import csv
import filecmp
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
TEMPLATES = ["default.json", "agent-sessions.json", "mooncake-conversation.json", "tracelab-replay.json", "dsv3-sglang-96xh100.json"]
TIMES = ["arrival_s", "admit_s", "prefill_start_s", "prefill_end_s", "transfer_start_s", "transfer_end_s", "first_token_s", "done_s"]


def templates():
    deps = []
    for f in TEMPLATES:
        p = os.path.join(ROOT, "scenarios", f)
        if os.path.exists(p):
            deps += json.load(open(p))["deployments"]
    return deps


def pool_knobs(rng, p, decode):
    p = dict(p)
    p["instances"] = rng.choice([1, 1, 2])
    if decode:
        p["max_running"] = rng.choice([1, 2, 8, 32, 64, 128, 256])
        if rng.random() < 0.2:
            p["mtp"] = {"draft_tokens": rng.choice([1, 2, 3]), "acceptance": round(rng.uniform(0, 1), 3)}
        p["cuda_graph"] = rng.random() < 0.8
    else:
        p["max_batch_tokens"] = rng.choice([512, 2048, 8192, 16384, 32768])
        p["chunk_tokens"] = min(p["max_batch_tokens"], rng.choice([256, 1024, 4096, 8192]))
    p["two_batch_overlap"] = rng.random() < 0.6
    if rng.random() < 0.3:
        p["ep_dispatch"] = rng.choice(["direct", "hierarchical"])
    if rng.random() < 0.2:
        p["all_to_all_on_fabric"] = True
    if rng.random() < 0.2:
        p["expert_imbalance"] = rng.choice([0, 1.0, 1.5])
    return p


def workload(rng, traces):
    k = rng.random()
    if k < 0.5:
        w = {"kind": "synthetic", "requests": rng.randint(1, 120), "rate_per_s": round(rng.uniform(0.2, 40), 3),
             "arrival": rng.choice(["poisson", "gamma"]),
             "input_tokens": {"dist": "lognormal", "mu": rng.uniform(4, 10.5), "sigma": rng.uniform(0.1, 1.5), "min": 1, "max": rng.choice([4096, 32768, 131072])},
             "output_tokens": {"dist": "lognormal", "mu": rng.uniform(0, 6), "sigma": rng.uniform(0.1, 1.5), "min": 1, "max": 2000},
             "shared_prefix_tokens": rng.choice([0, 0, 512, 4096]), "block_tokens": rng.choice([64, 512])}
        if w["arrival"] == "gamma":
            w["burstiness"] = round(rng.uniform(0.5, 8), 3)
        if w["shared_prefix_tokens"] >= w["input_tokens"]["max"]:  # the reader refuses a prefix at or past the longest prompt
            w["shared_prefix_tokens"] = 512
        return w
    if k < 0.85 or not traces:
        w = {"kind": "agent", "shared_prefix_tokens": rng.choice([0, 4096]), "block_tokens": 512}
        if rng.random() < 0.3:  # open loop: sessions arrive at a rate and start at round 0
            w.update(loop="open", rate_per_s=round(rng.uniform(0.2, 20), 3), sessions=rng.randint(1, 200))
        else:
            w.update(loop="closed", concurrency=rng.randint(1, 200), ramp_s=rng.choice([0, 1, 5]), start=rng.choice(["ramp", "stationary"]))
        return w
    return {"kind": "mooncake", "trace": os.path.join(traces, "mooncake", "conversation_trace.jsonl"), "block_tokens": 512}


def scenario(i, seed, deps, traces):
    rng = random.Random(seed * 1_000_003 + i)
    d = json.loads(json.dumps(rng.choice(deps)))
    d["name"] = f"d{i}"
    if rng.random() < 0.3:
        d["hardware"] = rng.choice(["h200", "b300"])
    d["prefill"] = pool_knobs(rng, d["prefill"], False)
    d["decode"] = pool_knobs(rng, d["decode"], True)
    d["router"] = rng.choice(["round_robin", "least_loaded", "cache_aware"])
    d["batch_scheduler"] = rng.choice(["fcfs", "shortest_first"])
    d["prefix_cache"] = {"enabled": rng.random() < 0.7}
    if rng.random() < 0.4:
        d["kv_tiers"] = {"enabled": True}
    else:
        d.pop("kv_tiers", None)
    d.pop("cluster", None)  # nodes: what the pools need
    d["slo"] = {"ttft_s": rng.choice([0.5, 2, 10]), "tpot_s": rng.choice([0.02, 0.05, 0.1])}
    horizon = round(rng.uniform(1, 8) if rng.random() < 0.7 else rng.uniform(8, 30), 3)
    sc = {"name": f"efuzz-{seed}-{i}", "seed": rng.randint(0, 2**31), "horizon_s": horizon,
          "workload": workload(rng, traces), "timeline": {"enabled": True}, "deployments": [d]}
    if rng.random() < 0.3:  # a steady-state window: warm-up arrivals counted apart
        sc["warmup_s"] = round(horizon * rng.uniform(0.1, 0.6), 3)
    return sc


def hardware(name):
    return json.load(open(os.path.join(ROOT, "scenarios", "hardware", name + ".json")))


def fnum(x):
    return float(x) if x not in ("", None) else None


def percentile(v, f):
    """Linear interpolation between order statistics (costmodels/percentile.hpp percentile_sorted)."""
    x = f * (len(v) - 1)
    i = int(math.floor(x))
    return v[i] + (x - i) * (v[i + 1] - v[i]) if i + 1 < len(v) else v[i]


def recompute_summary(rows, dsum):
    """summary.json's latencies and prompt-token sums recomputed from requests.csv, independently of the
    engine's collector: completed requests that arrived in the window (arrival >= window.start_s) give
    TTFT / TPOT / E2E p50, p90, p99 and mean (ms); input tokens = prompts whose prefill ended in the
    window, warm-up arrivals' included. Exact percentiles only (summary.json notes a histogram past 2^20
    values); requests.csv prints ms to 3 decimals, so the tolerance is 0.002 ms."""
    bad = []
    start = dsum.get("window", {}).get("start_s", 0.0)
    if "quantiles" in dsum.get("latency", {}):
        return bad
    done = [r for r in rows if r["status"] == "completed" and float(r["arrival_s"]) >= start]
    for metric, col in (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("e2e", "e2e_ms")):
        v = sorted(float(r[col]) for r in done if r[col] not in ("", None))
        got = dsum["latency"][metric]
        if not v:
            continue
        want = {"p50_ms": percentile(v, 0.5), "p90_ms": percentile(v, 0.9), "p99_ms": percentile(v, 0.99), "mean_ms": sum(v) / len(v)}
        for k, w in want.items():
            if got.get(k) is None or abs(got[k] - w) > 0.002 + 1e-6 * abs(w):
                bad.append(f"latency.{metric}.{k} {got.get(k)} != {w:.3f} recomputed from requests.csv")
    inp = sum(int(r["input_tokens"]) for r in rows if r["prefill_end_s"] not in ("", None) and float(r["prefill_end_s"]) >= start)
    if dsum.get("throughput", {}).get("input_tokens") not in (None, inp):
        bad.append(f"throughput.input_tokens {dsum['throughput']['input_tokens']} != {inp} recomputed from requests.csv")
    return bad


def check_deployment(ddir, dsum, dep, horizon):
    bad = []
    req = dsum["requests"]
    win = dsum.get("window", {}).get("warmup_requests", {})
    if req["arrived"] != req["completed"] + req["rejected"] + req["in_flight"]:
        bad.append(f"arrived {req['arrived']} != completed + rejected + in flight")
    if req["in_flight"] != sum(req.get("in_flight_phases", {}).values()):
        bad.append("in_flight != sum of in_flight_phases")
    if req["rejected"] != sum(req.get("rejected_reasons", {}).values()):
        bad.append("rejected != sum of rejected_reasons")
    rows = list(csv.DictReader(open(os.path.join(ddir, "requests.csv"))))
    if len(rows) != req["arrived"] + win.get("arrived", 0):
        bad.append(f"requests.csv rows {len(rows)} != arrived {req['arrived']} (+ warm-up {win.get('arrived', 0)})")
    count = {"completed": 0, "rejected": 0, "in_flight": 0}
    for r in rows:
        st = r["status"]
        if st not in count:
            bad.append(f"request {r['id']}: status {st!r}")
            continue
        count[st] += 1
        if st == "rejected" and not r["reason"]:
            bad.append(f"request {r['id']}: rejected without a reason")
        last = 0.0
        for f in TIMES:
            v = fnum(r.get(f))
            if v is None:
                continue
            if not math.isfinite(v) or v < 0 or v > horizon + 1e-6:
                bad.append(f"request {r['id']}: {f} = {v} outside [0, horizon {horizon}]")
            if v < last - 1e-6:
                bad.append(f"request {r['id']}: {f} = {v} before an earlier stage ({last})")
            last = max(last, v)
        ft, arr = fnum(r["first_token_s"]), fnum(r["arrival_s"])
        if ft is not None and r["ttft_ms"] and abs((ft - arr) * 1000 - float(r["ttft_ms"])) > 0.01:
            bad.append(f"request {r['id']}: ttft_ms {r['ttft_ms']} != first token - arrival")
        gen, out, inp = int(r["generated_tokens"]), int(r["output_tokens"]), int(r["input_tokens"])
        if st == "completed" and gen != out:
            bad.append(f"request {r['id']}: completed with {gen} of {out} tokens")
        if not 0 <= gen <= out:
            bad.append(f"request {r['id']}: generated {gen} of {out}")
        if not 0 <= int(r["cached_tokens"] or 0) <= inp:
            bad.append(f"request {r['id']}: cached {r['cached_tokens']} of {inp}")
    for k in count:
        if count[k] != req[k] + win.get(k, 0):
            bad.append(f"requests.csv {k} rows {count[k]} != summary {req[k]} (+ warm-up {win.get(k, 0)})")
    bad += recompute_summary(rows, dsum)
    for m, lat in dsum.get("latency", {}).items():
        if isinstance(lat, dict):
            for k, v in lat.items():
                if isinstance(v, (int, float)) and k != "count" and v < 0:
                    bad.append(f"latency.{m}.{k} = {v} < 0")
    for role, mem in dsum.get("memory_per_gpu", {}).items():
        if mem["kv_peak_gb"] > mem["kv_budget_gb"] + 1e-3:
            bad.append(f"{role}: KV peak {mem['kv_peak_gb']} GB > budget {mem['kv_budget_gb']} GB")
        if mem["hbm_peak_gb"] > mem["usable_gb"] + 1e-3:
            bad.append(f"{role}: HBM peak {mem['hbm_peak_gb']} GB > usable {mem['usable_gb']} GB")
    t = dsum.get("kv_tiers", {})
    if t.get("enabled"):
        into, held, left = t["bytes_offloaded_into_store"], t["bytes_held_at_end"], t["bytes_left_store"]
        if abs(into - (held + left)) > 1e-6 * max(1.0, into):
            bad.append(f"KV tiers: into store {into} != held {held} + left {left}")
        if t["bytes_offload_copies_started"] + t.get("bytes_preloaded_into_store", 0) < into + t["bytes_offload_abandoned"] - 1e-6 * max(1.0, into):
            bad.append("KV tiers: copies started + preloaded < into store + abandoned")
    # KV transfers: bytes / duration within the TP group's aggregate link rate
    hw = hardware(dep.get("hardware", "h200"))
    tp = max(dep["prefill"].get("attn_tp", 1), dep["decode"].get("attn_tp", 1))
    link = max(hw["nvlink_bytes_per_s_bidirectional"] / 2, hw["nic_bits_per_s"] / 8)
    tl = os.path.join(ddir, "timeline.json")
    if os.path.exists(tl):
        ev = json.load(open(tl))
        ev = ev["traceEvents"] if isinstance(ev, dict) else ev
        begin = {}
        for e in ev:
            if e.get("cat") != "kv":
                continue
            if e["ph"] == "b":
                begin[(e["name"], e["id"])] = e
            elif e["ph"] == "e" and (e["name"], e["id"]) in begin:
                b = begin.pop((e["name"], e["id"]))
                dur = (e["ts"] - b["ts"]) * 1e-6
                by = b.get("args", {}).get("bytes", 0)
                if by > 0 and dur >= 0 and by > tp * link * dur * (1 + 1e-6) + 1:
                    bad.append(f"KV transfer {b['name']} #{b['id']}: {by:.0f} B in {dur:.9f} s is faster than {tp} x {link / 1e9:.0f} GB/s")
        # KV-tier copies (cat kv-tier; tid 2 / 3 load-backs from L2 / L3, 4 offloads, 5 demotions): one
        # slice per copy that finished, so the summary's counters bound them (offloads exactly)
        if t.get("enabled"):
            n, nbytes = {2: 0, 3: 0, 4: 0, 5: 0}, {2: 0.0, 3: 0.0, 4: 0.0, 5: 0.0}
            for e in ev:
                if e.get("cat") == "kv-tier" and e["ph"] == "b":
                    n[e["tid"]] += 1
                    nbytes[e["tid"]] += e["args"]["bytes"]
            if n[4] != t["offloads"] - t["offloads_in_flight_at_end"]:
                bad.append(f"KV tiers: {n[4]} offload slices, summary {t['offloads']} offloads - {t['offloads_in_flight_at_end']} in flight")
            # a finished load-back has a slice on its tier's track: requests.csv rows with load_end_s
            # set, by load_tier (rev25b: an upper bound alone missed a dropped slice)
            rows_csv = os.path.join(ddir, "requests.csv")
            if os.path.exists(rows_csv):
                done = {2: 0, 3: 0}
                for row in csv.DictReader(open(rows_csv)):
                    if row["load_end_s"] and row["load_tier"] in ("2", "3"):
                        done[int(row["load_tier"])] += 1
                for tier in (2, 3):
                    if n[tier] != done[tier]:
                        bad.append(f"KV tiers: {n[tier]} load-back slices from L{tier}, requests.csv has {done[tier]} finished loads from L{tier}")
            for tid, count, by in ((2, "loads_from_L2", "bytes_loaded_from_L2"), (3, "loads_from_L3", "bytes_loaded_from_L3"),
                                   (4, "offloads", "bytes_offload_copies_started"), (5, None, "bytes_demoted_L2_to_L3")):
                if count and n[tid] > t[count]:
                    bad.append(f"KV tiers: {n[tid]} slices on track {tid} > {count} {t[count]}")
                if nbytes[tid] > t[by] * (1 + 1e-9) + 1:
                    bad.append(f"KV tiers: {nbytes[tid]:.0f} B on track {tid} > {by} {t[by]:.0f}")
    return bad


def self_test(o1, dsum, dep, horizon, tiers_only=False):
    """The checker must catch planted faults: each corruption of a clean output is a finding.
    tiers_only: only the KV-tier plant (None when this output finished no offload)."""
    ddir = os.path.join(o1, dep["name"])
    t = dsum.get("kv_tiers", {})
    if tiers_only and not (t.get("enabled") and t["offloads"] > t["offloads_in_flight_at_end"]):
        return None
    rows = list(csv.DictReader(open(os.path.join(ddir, "requests.csv"))))
    done = [r for r in rows if r["status"] == "completed" and r["transfer_end_s"]]
    if not done:
        return None  # this output cannot host every corruption: try the next scenario
    missed = []

    def with_rows(edit):
        rs = [dict(r) for r in rows]
        edit(rs)
        tmp = ddir + ".planted"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(ddir, tmp)
        with open(os.path.join(tmp, "requests.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rs)
        return tmp

    def fast_transfer():
        tmp = ddir + ".fast"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(ddir, tmp)
        tl = json.load(open(os.path.join(tmp, "timeline.json")))
        ev = tl["traceEvents"] if isinstance(tl, dict) else tl
        b = next(e for e in ev if e.get("cat") == "kv" and e["ph"] == "b")
        e = next(e for e in ev if e.get("cat") == "kv" and e["ph"] == "e" and e["id"] == b["id"] and e["name"] == b["name"])
        e["ts"] = b["ts"] + 1e-3  # 1 ns for the whole KV
        json.dump(tl, open(os.path.join(tmp, "timeline.json"), "w"))
        return tmp

    def tier_slice_dropped(tid=4):
        tmp = ddir + f".nomove{tid}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(ddir, tmp)
        tl = json.load(open(os.path.join(tmp, "timeline.json")))
        ev = tl["traceEvents"]
        b = next(e for e in ev if e.get("cat") == "kv-tier" and e["tid"] == tid)
        tl["traceEvents"] = [e for e in ev if not (e.get("cat") == "kv-tier" and e["id"] == b["id"])]
        json.dump(tl, open(os.path.join(tmp, "timeline.json"), "w"))
        return tmp

    if tiers_only:
        missed = [] if check_deployment(tier_slice_dropped(), dsum, dep, horizon) else ["an offload missing from the timeline"]
        tl = json.load(open(os.path.join(ddir, "timeline.json")))["traceEvents"]
        if any(e.get("cat") == "kv-tier" and e["tid"] == 2 for e in tl) and not check_deployment(tier_slice_dropped(2), dsum, dep, horizon):
            missed.append("a load-back missing from the timeline")
        return missed
    i = rows.index(done[0])
    plants = {
        "a row dropped": (with_rows(lambda rs: rs.pop(i)), dsum),
        "first token before the transfer ended": (with_rows(lambda rs: rs[i].update(first_token_s=str(float(rs[i]["transfer_end_s"]) - 1e-3))), dsum),
        "a completed request short of a token": (with_rows(lambda rs: rs[i].update(generated_tokens=str(int(rs[i]["output_tokens"]) - 1))), dsum),
        "KV peak above the budget": (ddir, _bump(dsum, "memory_per_gpu", "kv_peak_gb", 1e6)),
        "a KV transfer faster than its link": (fast_transfer(), dsum),
        "an in-flight request uncounted": (ddir, _bump(dsum, "requests", "in_flight", 1)),
        "a TTFT p99 off by 1 ms": (ddir, _bump_latency(dsum, "ttft", "p99_ms", 1.0)),
        "a prompt missing from the input tokens": (ddir, _bump(dsum, "throughput", "input_tokens", -1)),
    }
    for name, (d, s) in plants.items():
        if not check_deployment(d, s, dep, horizon):
            missed.append(name)
    return missed


def _bump(dsum, section, key, by):
    s = json.loads(json.dumps(dsum))
    sec = s[section]
    if section == "memory_per_gpu":
        for role in sec.values():
            role[key] += by
    else:
        sec[key] += by
    return s


def _bump_latency(dsum, metric, key, by):
    s = json.loads(json.dumps(dsum))
    s["latency"][metric][key] += by
    return s


def run_one(servesim, scen_path, out, timeout):
    t0 = time.time()
    p = subprocess.run([servesim, "run", scen_path, "--out", out, "--jobs", "1"], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stderr, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servesim", default=os.path.join(ROOT, "build-sim", "servesim"))
    ap.add_argument("--count", type=int, default=20, help="scenarios that ran (refused layouts do not count)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default="/tmp/servesim-efuzz")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per run (a hang is a finding)")
    ap.add_argument("--self-test", action="store_true", help="also plant faults in a clean output and require the checker to catch each")
    ap.add_argument("--traces", default=os.path.normpath(os.path.join(ROOT, "..", "shared", "traces")))
    a = ap.parse_args()
    if not os.path.exists(a.servesim):
        print(f"engine_fuzz: {a.servesim}: no such binary", file=sys.stderr)
        return 2
    traces = a.traces if os.path.exists(os.path.join(a.traces, "mooncake", "conversation_trace.jsonl")) else None
    deps = templates()
    os.makedirs(os.path.join(a.work, "findings"), exist_ok=True)
    ran = refused = findings = i = 0
    reasons = {}
    self_tested = tiers_tested = False
    wall = 0.0
    t_start = time.time()
    while ran < a.count and i < a.count * 20:
        sc = scenario(i, a.seed, deps, traces)
        i += 1
        path = os.path.join(a.work, "scenario.json")
        json.dump(sc, open(path, "w"), indent=1)
        o1, o2 = os.path.join(a.work, "o1"), os.path.join(a.work, "o2")
        for o in (o1, o2):
            shutil.rmtree(o, ignore_errors=True)
        problems = []
        try:
            rc, err, dt = run_one(a.servesim, path, o1, a.timeout)
        except subprocess.TimeoutExpired:
            rc, err, dt, problems = -1, "", a.timeout, [f"hang: more than {a.timeout} s"]
        if not problems and rc == 2 and err.strip() and "Traceback" not in err:
            refused += 1
            why = err.strip().splitlines()[-1].split(": ", 1)[-1][:90]
            reasons[why] = reasons.get(why, 0) + 1
            continue
        if not problems and rc != 0:
            problems.append(f"exit status {rc}: {err.strip()[-400:]}")
        if not problems:
            ran += 1
            wall += dt
            try:
                rc2, err2, _ = run_one(a.servesim, path, o2, a.timeout)
            except subprocess.TimeoutExpired:
                rc2, err2 = -1, "hang on the rerun"
            if rc2 != 0:
                problems.append(f"rerun exit status {rc2}: {err2.strip()[-300:]}")
            else:
                cmp = filecmp.dircmp(o1, o2)
                stack = [cmp]
                while stack:
                    c = stack.pop()
                    diff = c.diff_files + c.left_only + c.right_only
                    # filecmp compares stat signatures first: force a byte compare of the same-named files
                    same, differ, errs = filecmp.cmpfiles(c.left, c.right, c.common_files, shallow=False)
                    if diff or differ or errs:
                        problems.append(f"rerun differs in {c.left}: {sorted(set(diff + differ + errs))}")
                    stack += list(c.subdirs.values())
            if not problems:
                summ = json.load(open(os.path.join(o1, "summary.json")))
                for dsum, dep in zip(summ["deployments"], sc["deployments"]):
                    try:
                        problems += check_deployment(os.path.join(o1, dep["name"]), dsum, dep, sc["horizon_s"])
                    except (KeyError, ValueError, OSError) as e:
                        problems.append(f"unreadable output: {e!r}")
        if not problems and a.self_test and not self_tested:
            missed = self_test(o1, summ["deployments"][0], sc["deployments"][0], sc["horizon_s"])
            if missed is not None:
                self_tested = True
                if missed:
                    problems.append(f"self-test: the checker missed planted faults: {missed}")
                else:
                    print("[efuzz] self-test: every planted fault was caught", flush=True)
        if not problems and a.self_test and not tiers_tested:  # the KV-tier plant needs a run with offloads
            missed = self_test(o1, summ["deployments"][0], sc["deployments"][0], sc["horizon_s"], tiers_only=True)
            if missed is not None:
                tiers_tested = True
                if missed:
                    problems.append(f"self-test: the checker missed planted faults: {missed}")
                else:
                    print("[efuzz] self-test: a dropped KV-tier offload slice (and load-back slice, where the run has one) was caught", flush=True)
        if problems:
            findings += 1
            keep = os.path.join(a.work, "findings", f"{sc['name']}.json")
            shutil.copy(path, keep)
            print(f"[efuzz] FINDING scenario {i - 1} ({keep}):", file=sys.stderr)
            for p in problems[:10]:
                print(f"  - {p}", file=sys.stderr)
        if ran and ran % 50 == 0:
            print(f"[efuzz] {ran} ran, {refused} refused, {findings} findings, {time.time() - t_start:.0f} s", flush=True)
    print(f"[efuzz] seed {a.seed}: {ran} scenarios ran twice ({refused} drawn layouts refused cleanly with exit 2), "
          f"{findings} findings; first-run wall {wall:.1f} s ({wall / max(ran, 1):.2f} s per scenario), total {time.time() - t_start:.0f} s")
    for why, n in sorted(reasons.items(), key=lambda x: -x[1])[:5]:
        print(f"[efuzz]   refused {n}x: {why}")
    if a.self_test and not self_tested:
        print("[efuzz] self-test: no scenario had a completed request to plant faults in", file=sys.stderr)
        return 1
    if a.self_test and not tiers_tested:  # a few seeds draw none: said, not a failure
        print("[efuzz] self-test: no scenario finished a KV-tier offload, so that plant was not tried")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
