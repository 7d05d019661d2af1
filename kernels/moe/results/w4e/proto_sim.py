"""Barrier-protocol model of w4a16_prefill_kernel (variant 8: PM 0, SA 3) and w4a16_prefill_pw_kernel<PM, K2>
(11 = PM 1, 12 = PM 1 + K2, 13 = PM 0 + K2, 14 = PM 2, 15 = PM 3): producer, decoding warps, 8 consumer warps
(wgmma aligned per warpgroup, a slot's reads done by the consumer's wait_group 1 of the next k-block), the TMA
token tile and the bulk weight copy completing as two separate agents; random interleavings. Reports deadlocks
and ring overwrite / stale-read hazards (weight block: read by the decoding warps; token tile: by the consumers).
results/w4c/proto_sim.py with the two copies modelled separately and PM 3 (NOTES.md §17): the weight copy on its
own barrier full_w (the decoding warps wait on it), issued first; full_l then counts only the token tile. PM 4: the
weight blocks in their own ring of SWR slots, loaded by decoding warp 0 (the first SWR up front, then in round kb,
after its own release, the slot of kb-1 with kb-1+SWR once every decoding warp released it: empty_w)."""
import random, sys

class Bar:
    def __init__(s, n): s.n, s.pend, s.phase = n, n, 0
    def arrive(s):
        s.pend -= 1
        if s.pend == 0: s.phase += 1; s.pend = s.n
    def done(s, parity): return (s.phase & 1) != parity

def run(PM, K2, KB, SL=4, SAK=4, buggy14=False, seed=0, SWR=7):
    rnd = random.Random(seed)
    R = 2 if K2 else 1; NA = SAK // R; ND = 3 if PM == 1 else 4
    SW = PM >= 3; WR = PM == 4; NW = SWR if WR else SL
    # full_l: 1 expect_tx arrival + the TMA bytes (+ the bulk bytes unless PM 3); the byte counts are modelled as
    # one completion arrival per copy
    full_l = [Bar(2 if SW else 3) for _ in range(SL)]; empty_l = [Bar(8) for _ in range(SL)]
    full_w = [Bar(2) for _ in range(NW)] if SW else full_l  # PM 3/4: 1 expect_tx arrival + the bulk copy's bytes
    empty_w = [Bar(ND) for _ in range(NW)]  # PM 4
    full_a = [Bar(ND) for _ in range(NA)]; empty_a = [Bar(8) for _ in range(NA)]
    lslot = [None] * SL; wslot = [None] * NW; aslot = [None] * SAK
    lreaders = [set() for _ in range(SL)]; wreaders = [set() for _ in range(NW)]; areaders = [set() for _ in range(SAK)]
    wg_mma = {}
    agents = []
    def load(kb):
        s = kb % SL
        yield lambda: empty_l[s].done(((kb // SL) & 1) ^ 1)
        if WR:  # token tile only
            full_l[s].arrive(); agents.append(tma(kb))
        elif SW:  # weight copy first, on full_w; then the token tile on full_l
            full_w[s].arrive(); agents.append(bulk(kb))
            full_l[s].arrive(); agents.append(tma(kb))
        else:
            full_l[s].arrive(); agents.append(tma(kb)); agents.append(bulk(kb))
    def tma(kb):
        yield None
        s = kb % SL
        assert not lreaders[s], f"token slot {s} overwritten by kb {kb} while kb {lslot[s]} still read by {lreaders[s]}"
        lslot[s] = kb; lreaders[s] = {('c', c) for c in range(8)}
        full_l[s].arrive()
    def load_w(kb):
        s = kb % NW
        yield lambda: empty_w[s].done(((kb // NW) & 1) ^ 1)
        full_w[s].arrive(); agents.append(bulk(kb))
    def bulk(kb):
        yield None
        s = kb % NW
        assert not wreaders[s], f"weight slot {s} overwritten by kb {kb} while kb {wslot[s]} still read by {wreaders[s]}"
        wslot[s] = kb; wreaders[s] = {('d', w) for w in range(ND)}
        full_w[s].arrive()
    def decode(w):
        if PM == 0 and w == 0:
            for kb in range(min(SL if K2 else SL - 1, KB)): yield from load(kb)
        if WR and w == 0:
            for kb in range(min(NW, KB)): yield from load_w(kb)
        for kb0 in range(0, KB, R):
            r = kb0 // R; sa = r % NA
            for j in range(R):
                kb = kb0 + j
                yield (lambda kb=kb: full_w[kb % NW].done((kb // NW) & 1))
            yield lambda: empty_a[sa].done(((r // NA) & 1) ^ 1)
            for j in range(R):
                kb = kb0 + j
                assert wslot[kb % NW] == kb, f"decode w{w} kb {kb}: weight slot holds {wslot[kb % NW]}"
                if not WR: wreaders[kb % NW].discard(('d', w))  # PM 4: released after the decode, below
                a = kb % SAK
                assert not (areaders[a] and aslot[a] != kb), f"A slot {a} overwritten by kb {kb} while kb {aslot[a]} read by {areaders[a]}"
                if aslot[a] != kb: aslot[a] = kb; areaders[a] = {('c', c) for c in range(8)}
                yield None
            full_a[sa].arrive()
            if WR:
                wreaders[kb0 % NW].discard(('d', w)); empty_w[kb0 % NW].arrive()
                if w == 0 and kb0 >= 1 and kb0 - 1 + NW < KB: yield from load_w(kb0 - 1 + NW)
            if PM == 0 and w == 0:
                if K2:
                    for j in range(R):
                        if SL <= kb0 + R + j < KB: yield from load(kb0 + R + j)
                elif kb0 + SL - 1 < KB: yield from load(kb0 + SL - 1)
    def producer():
        for kb in range(KB): yield from load(kb)
    def consumer(cw):
        wg = cw // 4
        if PM >= 2 and cw == 0:
            for kb in range(min(SL - 1 if buggy14 else SL, KB)): yield from load(kb)
        for kb in range(KB):
            s = kb % SL
            yield lambda: full_l[s].done((kb // SL) & 1)
            if not K2 or kb % 2 == 0:
                yield lambda: full_a[(kb // R) % NA].done(((kb // R) // NA) & 1)
            assert lslot[s] == kb and aslot[kb % SAK] == kb, f"consumer {cw} kb {kb}: load {lslot[s]} A {aslot[kb % SAK]}"
            key = (wg, kb); wg_mma[key] = wg_mma.get(key, 0) + 1
            yield lambda: wg_mma[key] == 4   # wgmma.mma_async is warpgroup-aligned
            if kb > 0:  # wait_group 1: kb-1's wgmmas (and their smem reads) are done
                lreaders[(kb - 1) % SL].discard(('c', cw)); areaders[(kb - 1) % SAK].discard(('c', cw))
                empty_l[(kb - 1) % SL].arrive()
                if not K2 or kb % 2 == 0: empty_a[((kb - 1) // R) % NA].arrive()
                if PM >= 2 and cw == 0 and kb + SL - 1 < KB: yield from load(kb + SL - 1)
    for w in range(ND): agents.append(decode(w))
    if PM == 1: agents.append(producer())
    for c in range(8): agents.append(consumer(c))
    cond = {}
    done = set()
    steps = 0
    while True:
        live = [a for a in agents if id(a) not in done]
        if not live: return 'ok'
        ready = [a for a in live if cond.get(id(a)) is None or cond[id(a)]()]
        if not ready: return 'DEADLOCK'
        a = rnd.choice(ready)
        try:
            c = next(a); cond[id(a)] = c; steps += 1
        except StopIteration:
            done.add(id(a))

forms = {'v8': (0, False, 3, False), 'v11': (1, False, 4, False), 'v12': (1, True, 4, False), 'v13': (0, True, 4, False),
         'v14': (2, False, 4, False), 'v14-first-form': (2, False, 4, True), 'v15': (3, False, 4, False), 'v16': (4, False, 4, False)}
for name, (PM, K2, SAK, bug) in forms.items():
    res = {}
    for KB in (2, 4, 6, 8, 10, 12, 24):
        for seed in range(300 if KB <= 12 else 60):
            try: r = run(PM, K2, KB, SAK=SAK, buggy14=bug, seed=seed)
            except AssertionError as e: r = 'HAZARD: ' + str(e)
            res.setdefault(r, []).append((KB, seed))
    print(name, {k: (len(v), v[:2]) for k, v in res.items()})
