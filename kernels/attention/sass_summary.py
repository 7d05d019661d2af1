#!/usr/bin/env python3
"""Per-kernel instruction counts from `cuobjdump -sass` on stdin (tensor-core, shared/async loads,
local-memory traffic, special functions, barriers): the static evidence cited in NOTES.md."""
import re
import sys

txt = sys.stdin.read()
pats = [("HMMA", r"\bHMMA\b"), ("QGMMA/HGMMA", r"\b[QH]GMMA\b"), ("LDSM", r"\bLDSM\b"), ("LDGSTS", r"\bLDGSTS\b"),
        ("LDG", r"\bLDG\b"), ("STG", r"\bSTG\b"), ("LDL/STL", r"\b(?:LDL|STL)\b"), ("MUFU", r"\bMUFU\b"),
        ("SHFL", r"\bSHFL\b"), ("BAR", r"\bBAR\b"), ("F2FP", r"\bF2FP\b")]
print("%-70s " % "kernel" + " ".join("%11s" % k for k, _ in pats))
for f in re.split(r"\n\s+Function : ", txt)[1:]:
    name = f.split("\n")[0].strip()
    if "servesim4attn" not in name:
        continue
    short = re.sub(r"_ZN8servesim4attn\d*_GLOBAL__N__[0-9a-f_]*_cu_[0-9a-f]*\d*", "", name)
    short = re.sub(r"_ZN8servesim4attn\d*", "", short)[:70]
    print("%-70s " % short + " ".join("%11d" % len(re.findall(p, f)) for _, p in pats))
