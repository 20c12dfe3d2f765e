#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
# Part of dat2: exact per-operation counts from a callgrind profile.
#
#   callgrind_atomics.py CALLGRIND_OUT N
#
# CALLGRIND_OUT was written with --dump-instr=yes (and, say, --toggle-collect=FUNCTION around
# N operations). Prints "INSTRUCTIONS ATOMICS" per operation on stdout: the instructions
# executed, and the atomic read-modify-writes among them (x86 instructions with a lock prefix,
# and xchg with memory, which locks implicitly), found by disassembling each object with
# objdump. On stderr: the atomics by function, most executed first.
import collections
import re
import subprocess
import sys


def parse(path):
    """Executions per (object, address), and the function of each address."""
    names = {}
    counts = collections.defaultdict(lambda: collections.defaultdict(int))
    fn_of = {}
    ob = fn = None
    addr = 0
    total = 0
    after_calls = False
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^(c?ob|c?fn|c?fl|fi|fe)=\((\d+)\)(?: (.*))?$", line)
        if m:
            kind, ident, name = m.groups()
            if name:
                names[(kind.lstrip("c"), ident)] = name
            if kind == "ob":
                ob = names.get(("ob", ident))
            elif kind == "fn":
                fn = names.get(("fn", ident))
            continue
        if line.startswith("summary:") or line.startswith("totals:"):
            total = int(line.split()[1])
            continue
        if line.startswith("calls="):
            after_calls = True
            continue
        first = line.split()[0]
        if not re.match(r"^(0x[0-9a-fA-F]+|[+-]\d+|\*)$", first):
            continue
        parts = line.split()
        if first.startswith("0x"):
            addr = int(first, 16)
        elif first != "*":
            addr += int(first)
        if after_calls:
            # The inclusive cost of a call, not executions of this instruction.
            after_calls = False
            continue
        if len(parts) >= 3:
            counts[ob][addr] += int(parts[2])
            fn_of[(ob, addr)] = fn
    return total, counts, fn_of


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    total, counts, fn_of = parse(path)
    atomics = 0
    by_fn = collections.Counter()
    for obj, per_addr in counts.items():
        if not obj:
            continue
        dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], capture_output=True, text=True, check=False).stdout
        for line in dis.splitlines():
            m = re.match(r"^\s*([0-9a-f]+):\s+(\S+)(.*)$", line)
            if not m:
                continue
            a = int(m.group(1), 16)
            if a not in per_addr:
                continue
            op, rest = m.group(2), m.group(3)
            if op == "lock" or (op.startswith("xchg") and "(" in rest):
                atomics += per_addr[a]
                by_fn[fn_of[(obj, a)]] += per_addr[a]
    print(f"{total / n:.0f} {atomics / n:.1f}")
    for f, c in by_fn.most_common():
        if c * 10 >= n:
            print(f"  {c / n:5.1f} atomic RMWs per op in {f}", file=sys.stderr)


if __name__ == "__main__":
    main()
