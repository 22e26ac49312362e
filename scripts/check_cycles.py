#!/usr/bin/env python3
"""check_cycles.py - no two files of a folder call each other, directly or
round a longer circle (`make check-layers`, with check_layers.sh for the
folders themselves).

    python3 scripts/check_cycles.py DIR...

For each folder, every non-static function a .c file defines (kp_ and kp__
names) is that file's; a file that calls another file's function depends
on it. A circle of such dependencies is printed with the functions that
close it, and the exit status is 1. Comments and string literals are
stripped first; calls through pointers are not seen (that is how a lower
file takes a callback from a higher one)."""
import os
import re
import sys

DEF = re.compile(r"^(?!static\b)[A-Za-z_][\w \t*]*?\b(kp_\w+)\s*\([^;{]*\)\s*\{", re.M)
CALL = re.compile(r"\b(kp_\w+)\s*\(")


def strip(src):
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    src = re.sub(r"//[^\n]*", " ", src)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', src)


def cycles(folder):
    files = sorted(f for f in os.listdir(folder) if f.endswith(".c"))
    text = {f: strip(open(os.path.join(folder, f), errors="replace").read()) for f in files}
    owner = {}
    for f in files:
        for m in DEF.finditer(text[f]):
            owner.setdefault(m.group(1), f)
    deps = {f: {} for f in files}
    for f in files:
        for m in CALL.finditer(text[f]):
            g = owner.get(m.group(1))
            if g and g != f:
                deps[f].setdefault(g, m.group(1))
    found, seen = [], set()

    def walk(path):
        for g, fn in sorted(deps[path[-1]].items()):
            if g == path[0]:
                key = frozenset(path)
                if key not in seen:
                    seen.add(key)
                    found.append(path + [g])
            elif g not in path and g > path[0]:
                walk(path + [g])
    for f in files:
        walk([f])
    return [(c, [deps[a][b] for a, b in zip(c, c[1:])]) for c in found]


def main():
    bad = 0
    for folder in sys.argv[1:]:
        for c, fns in cycles(folder):
            bad = 1
            print("check-cycles: %s: %s" % (folder, " -> ".join(
                "%s (%s)" % (a, fn) for a, fn in zip(c, fns)) + " -> " + c[-1]), file=sys.stderr)
    return bad


if __name__ == "__main__":
    sys.exit(main())
