#!/usr/bin/env python3
"""The one-way data flow of ARCHITECTURE.md, checked on the #include lines of the simulator:

  scenarios ──► workloads, topology, costmodels ──► sim (engine, policies, kvcache, exporters, cli)
  costmodels/calibration (offline, Eigen) is included only by itself, the `costmodel` command and the
  `validate` command's kernel checks (sim/cli/validate_kernels.cpp).

  python3 tests/tools/include_arrows.py [ROOT] [--table]   # exit 1 on any arrow the wrong way
"""
import os, re, sys
from collections import Counter

ALLOWED = {  # folder → folders its files may include from
    'scenarios': {'scenarios'},
    'workloads': {'scenarios', 'workloads'},
    'topology': {'scenarios', 'topology'},
    'costmodels': {'scenarios', 'costmodels'},
    'costmodels/calibration': {'scenarios', 'costmodels', 'costmodels/calibration'},
    'sim': {'scenarios', 'workloads', 'topology', 'costmodels', 'sim'},
}
# the `costmodel` command, and the `validate` command's published H800 kernel checks (fit_report.hpp)
CALIBRATION_USERS = {'sim/cli/costmodel_cmd.cpp', 'sim/cli/costmodel_cmd.hpp', 'sim/cli/validate_kernels.cpp'}

def area(path):
    if path.startswith('costmodels/calibration/'): return 'costmodels/calibration'
    return path.split('/')[0]

def main():
    args = sys.argv[1:]
    root = args[0] if args and not args[0].startswith('--') else '.'
    bad, arrows = 0, Counter()
    for top in ('scenarios', 'workloads', 'topology', 'costmodels', 'sim'):
        for base, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if not f.endswith(('.cpp', '.hpp')): continue
                rel = os.path.relpath(os.path.join(base, f), root)
                src_area = area(rel)
                for inc in re.findall(r'^#include "([^"]+)"', open(os.path.join(root, rel), encoding='utf-8').read(), re.M):
                    dst_area = area(inc)
                    if dst_area not in ALLOWED: continue  # third-party headers
                    arrows[(src_area, dst_area)] += 1
                    ok = dst_area in ALLOWED[src_area]
                    if dst_area == 'costmodels/calibration' and not src_area.startswith('costmodels/calibration'):
                        ok = rel in CALIBRATION_USERS
                    if not ok:
                        print(f'{rel}: includes "{inc}" ({src_area} → {dst_area} is against the flow)'); bad += 1
    if '--table' in args:
        for (a, b), n in sorted(arrows.items()):
            if a != b: print(f'{a:24} → {b:24} {n}')
    sys.exit(1 if bad else 0)

main()
