#!/usr/bin/env python3
"""Room sizes of the simulator (kernels/ and tests/ excluded): files over the line limit and
functions over the function limit. Function bodies are found by brace matching on code with
strings and comments removed (a heuristic good enough for this code base's formatting).

  python3 tests/tools/room_sizes.py [ROOT] [--file-max 500] [--fn-max 80]   # exit 1 if any is over
"""
import os, re, sys

def strip(src):
    src = re.sub(r'//[^\n]*', '', src)
    src = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), src, flags=re.S)
    src = re.sub(r'R"\((.*?)\)"', lambda m: '""' + '\n' * m.group(0).count('\n'), src, flags=re.S)
    src = re.sub(r'"(\\.|[^"\\\n])*"', '""', src)
    src = re.sub(r"'(\\.|[^'\\\n])'", "''", src)
    return src

def functions(src):
    """(name, first line, lines) of each brace block that opens a function body."""
    out, depth, stack = [], 0, []
    lines = src.split('\n')
    text = src
    i = 0
    for m in re.finditer(r'[{}]', text):
        line = text.count('\n', 0, m.start()) + 1
        if m.group(0) == '{':
            head = text[max(0, m.start() - 300):m.start()]
            head_line = head.split(';')[-1].split('}')[-1]
            is_fn = re.search(r'\)\s*(const)?\s*(noexcept)?\s*(override|final)?\s*(->\s*[\w:<>]+)?\s*(:[^{]*)?$', head_line.strip()) is not None \
                and not re.search(r'\b(if|for|while|switch|catch)\s*\(', head_line.split('\n')[-1]) \
                and not re.search(r'\[[^\]]*\]\s*\([^)]*\)\s*(mutable)?\s*(->\s*[\w:<>]+)?\s*$', head_line.strip())
            name = re.findall(r'([~\w:]+)\s*\(', head_line)
            stack.append((is_fn, name[0] if name else '?', line))
        else:
            if not stack: continue
            is_fn, name, start = stack.pop()
            if is_fn and not any(s[0] for s in stack):
                out.append((name, start, line - start + 1))
    return out

def main():
    args = sys.argv[1:]
    root = args[0] if args and not args[0].startswith('--') else '.'
    fmax = int(args[args.index('--file-max') + 1]) if '--file-max' in args else 500
    gmax = int(args[args.index('--fn-max') + 1]) if '--fn-max' in args else 80
    bad = 0
    largest = []
    for d in ('scenarios', 'workloads', 'topology', 'costmodels', 'sim'):
        for base, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if not f.endswith(('.cpp', '.hpp')): continue
                p = os.path.join(base, f)
                src = open(p, encoding='utf-8').read()
                n = src.count('\n')
                if n > fmax:
                    print(f'file {p}: {n} lines (> {fmax})'); bad += 1
                for name, start, length in functions(strip(src)):
                    largest.append((length, f'{p}:{start} {name}'))
                    if length > gmax:
                        print(f'function {p}:{start} {name}: {length} lines (> {gmax})'); bad += 1
    largest.sort(reverse=True)
    print('largest functions:', ', '.join(f'{w} ({l})' for l, w in largest[:8]))
    sys.exit(1 if bad else 0)

main()
