#!/usr/bin/env python3
"""The fuzz seed corpora (fuzz/corpus/{scenario,model,hardware}) start from the shipped files: every
shipped scenario, model and hardware file has a seed of the same name, byte-identical, so a change to
a shipped file cannot leave the fuzzers starting from a stale copy (two were found stale on Dec 1 2026).
Hand-made seeds with other names are allowed. Exit 1 with the list of stale or missing seeds."""
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
pairs = [("scenarios", "scenario"), ("scenarios/models", "model"), ("scenarios/hardware", "hardware")]
bad = []
for shipped, corpus in pairs:
    for f in sorted((root / shipped).glob("*.json")):
        seed = root / "fuzz" / "corpus" / corpus / f.name
        if not seed.exists():
            bad.append(f"missing seed fuzz/corpus/{corpus}/{f.name} (shipped {shipped}/{f.name})")
        elif seed.read_bytes() != f.read_bytes():
            bad.append(f"stale seed fuzz/corpus/{corpus}/{f.name}: differs from {shipped}/{f.name} (cp it)")
for b in bad:
    print(b)
print(f"fuzz seeds: {len(bad)} stale or missing")
sys.exit(1 if bad else 0)
