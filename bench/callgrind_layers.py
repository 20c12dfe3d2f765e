#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
# Part of dat2: exact instructions per operation from a callgrind profile, split by dat2's layers.
#
#   callgrind_layers.py [--less K OTHER_OUT M] CALLGRIND_OUT N [ENTRY...]
#   callgrind_layers.py --per-entry CALLGRIND_OUT N ENTRY...
#
# CALLGRIND_OUT was written with --toggle-collect=ENTRY for each ENTRY (the harness's own
# functions that make the measured DAT calls, e.g. bench/ops_native.c's post_op and
# dequeue_op), around N operations. Every function is put in a layer by the module path of
# its (demangled) name, never by the function's own name, so the figures survive renames:
#   api, registry, builtin, device, ffi   dat2::<layer>:: (for "<X as Trait>::f", X's path,
#                                         or the trait's when X is a type parameter); a
#                                         function with no path in libdat2 (the exported C
#                                         entry points) by its source file, src/<layer>/
#   dat2       other dat2:: modules (log, util, abi, ...)
#   std        Rust's core/alloc/std code compiled into libdat2 (generic code, locks, ...)
#   libc       libc and the loader (malloc, free, memcpy, syscall wrappers, ...) and Rust's
#              allocation shims (__rust_alloc, ...): "libc+allocator"
#   harness    the ENTRY functions' own instructions (the calls' set-up, not libdat2's)
#   other      anything else
# Prints on stdout one line of figures per operation, "KEY VALUE" pairs:
#   whole       every instruction executed in the ENTRY functions' calls into libraries
#               (the ENTRY functions' own instructions are left out)
#   devex       whole minus the inclusive cost of every call from a function that is not in
#               the device layer into one that is (dat2::device::...), unless the caller
#               itself runs beneath such a call: what dat2's own layers and the allocator
#               cost, the device's copy, locks and system calls excluded
#   devcalls    whole - devex
#   <layer>     the instructions executed in each layer's functions themselves (exclusive),
#               where the layers' sum is whole (libc counts what the device calls too)
#   x_<layer>   the same outside the device's calls: their sum is devex
# With --less K OTHER_OUT M, K operations of another profile (M operations in OTHER_OUT) are
# taken away first, at that profile's rate: e.g. the dequeues that found nothing among the
# measured ones, at the rate of a run of empty dequeues.
# With --per-entry, each ENTRY made N operations of its own: prints "ENTRY VALUE" pairs, VALUE
# being the "whole" figure of that ENTRY's calls alone (the inclusive cost of every call it
# made, per operation), e.g. the same dequeue before and after some work that is not measured.
# On stderr: the heaviest functions (exclusive, per operation), for the curious.
import collections
import re
import sys

LAYERS = ("api", "registry", "builtin", "device", "ffi", "dat2", "std", "libc", "harness", "other")


def parse(path):
    """Exclusive costs per function, inclusive costs per call arc, each function's object and file."""
    names = {}
    self_cost = collections.Counter()
    arcs = collections.Counter()
    obj_of, file_of = {}, {}
    npos = 1
    ob = fl = fn = None
    cob = cfn = None
    pending_call = False
    total = 0

    def name(kind, ident, text):
        if text:
            names[(kind, ident)] = text
        return names.get((kind, ident), ident)

    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^(c?ob|c?fn|c?fl|cfi|fi|fe)=\((\d+)\)(?: (.*))?$", line)
        if not m:
            m2 = re.match(r"^(c?ob|c?fn|c?fl|cfi|fi|fe)=(.*)$", line)
            if m2:  # uncompressed names
                m = (m2.group(1), m2.group(2), m2.group(2))
            else:
                m = None
        else:
            m = m.groups()
        if m:
            kind, ident, text = m
            base = {"cob": "ob", "cfn": "fn", "cfl": "fl", "cfi": "fl", "fi": "fl", "fe": "fl"}.get(kind, kind)
            value = name(base, ident, text)
            if kind == "ob":
                ob = value
                cob = None
            elif kind == "fl":  # (fi=/fe=, inlined code, do not change the function's file)
                fl = value
            elif kind == "fn":
                fn = value
                obj_of.setdefault(fn, ob)
                file_of.setdefault(fn, fl)
                cob = None
            elif kind == "cob":
                cob = value
            elif kind == "cfn":
                cfn = value
                obj_of.setdefault(cfn, cob if cob is not None else ob)
            continue
        if line.startswith("positions:"):
            npos = len(line.split()[1:])
            continue
        if line.startswith("summary:") or line.startswith("totals:"):
            total = int(line.split()[1])
            continue
        if line.startswith("calls="):
            pending_call = True
            continue
        parts = line.split()
        if not parts or not re.match(r"^(0x[0-9a-fA-F]+|[+-]?\d+|\*)$", parts[0]):
            continue
        costs = parts[npos:]
        ir = int(costs[0]) if costs else 0
        if pending_call:
            pending_call = False
            arcs[(fn, cfn)] += ir
            cob = None
        else:
            self_cost[fn] += ir
    return total, self_cost, arcs, obj_of, file_of


def first_path(fname):
    """The module path a (demangled) function name belongs to."""
    s = fname.strip()
    m = re.match(r"^<(.+?) as ([^>]+)>::", s)
    if m:
        self_ty, trait = m.group(1), m.group(2)
        # a type parameter (T, F, ...) or a reference to one: the trait's path
        if re.match(r"^[&*\s]*(mut\s+|const\s+)?[A-Z][A-Za-z0-9_]*$", self_ty):
            return trait
        return self_ty.lstrip("&* ").replace("mut ", "").replace("dyn ", "")
    return s.lstrip("<&* ").replace("dyn ", "")


def layer(fname, obj, fil, entries):
    if fname in entries:
        return "harness"
    path = first_path(fname)
    m = re.match(r"^dat2::(\w+)::", path)
    if m:
        return m.group(1) if m.group(1) in ("api", "registry", "builtin", "device", "ffi") else "dat2"
    o = obj or ""
    if re.match(r"^(__rustc::|__rust_|__rdl_)", path):  # the allocator's shims
        return "libc"
    if re.search(r"/libc[.-]|/ld-linux|/libm[.-]|/libpthread|/vgpreload", o):
        return "libc"
    if "libdat2" in o:
        if re.match(r"^(core|alloc|std|hashbrown|parking_lot|compiler_builtins|<)", path):
            return "std"
        f = fil or ""
        m = re.search(r"/src/(api|registry|builtin|device)/", f)
        if m:
            return m.group(1)
        if re.search(r"/src/ffi\.rs$", f):
            return "ffi"
        if re.search(r"/rustc/|/\.cargo/", f):
            return "std"
        return "dat2"
    return "other"


def figures(path, entries):
    """Totals (not yet divided) of one profile: [(key, value)], and the heaviest functions."""
    total, self_cost, arcs, obj_of, file_of = parse(path)
    fns = set(self_cost) | {c for (_, c) in arcs} | {f for (f, _) in arcs}
    lay = {f: layer(f, obj_of.get(f), file_of.get(f), entries) for f in fns}
    whole = sum(c for f, c in self_cost.items() if lay[f] != "harness")
    # What runs outside those calls, by layer: a function's exclusive cost is split by the
    # share of the calls into it that come from device code or from functions that run beneath
    # the device (exact when each function is reached from one side only).
    callers = collections.defaultdict(list)
    for (f, g), c in arcs.items():
        callers[g].append((f, c))
    under = {}  # the share of a function's executions beneath a device call

    def frac(g, depth=0):
        if lay[g] == "device":
            return 1.0
        if g in under:
            return under[g]
        under[g] = 0.0  # (a cycle counts as outside until known)
        ins = callers.get(g, [])
        tot = sum(c for _, c in ins)
        if tot == 0 or depth > 200:
            return 0.0
        v = sum(c * frac(f, depth + 1) for f, c in ins) / tot
        under[g] = v
        return v

    # Calls into the device from outside it: their inclusive costs are the device's share
    # (a call from a function that itself runs beneath the device, e.g. a generic iterator
    # that calls back into a device closure, is already inside an outer one).
    into_device = sum(c * (1.0 - frac(f)) for (f, g), c in arcs.items() if lay[f] != "device" and lay[g] == "device")
    by_layer = collections.Counter()
    outside = collections.Counter()
    for f, c in self_cost.items():
        by_layer[lay[f]] += c
        if lay[f] != "device":
            outside[lay[f]] += c * (1.0 - frac(f))
    out = [("whole", whole), ("devex", whole - into_device), ("devcalls", into_device)]
    out += [(k, by_layer[k]) for k in LAYERS if k != "harness"]
    out += [("x_" + k, outside[k]) for k in LAYERS if k not in ("harness", "device")]
    heavy = [(c, lay[f], f) for f, c in self_cost.most_common(30) if lay[f] != "harness"]
    if total and abs(total - sum(self_cost.values())) > total // 1000:
        print(f"  note: {path}: the file's total {total} and the functions' sum {sum(self_cost.values())} differ",
              file=sys.stderr)
    return out, heavy


def main():
    args = sys.argv[1:]
    if args and args[0] == "--per-entry":
        if len(args) < 4:
            print("usage: callgrind_layers.py --per-entry CALLGRIND_OUT N ENTRY...", file=sys.stderr)
            sys.exit(2)
        _, _, arcs, _, _ = parse(args[1])
        n = int(args[2])
        print(" ".join(f"{e} {sum(c for (f, _), c in arcs.items() if f == e) / n:.1f}" for e in args[3:]))
        return
    less = None
    if len(args) >= 2 and args[0] == "--less":
        # --less K OTHER_OUT M: K operations of the profile OTHER_OUT (M operations) are
        # among the N counted (e.g. dequeues that found nothing): taken away at its rate
        less = (float(args[1]), args[2], int(args[3]))
        args = args[4:]
    if len(args) < 2:
        print("usage: callgrind_layers.py [--less K OTHER_OUT M] CALLGRIND_OUT N [ENTRY...]", file=sys.stderr)
        sys.exit(2)
    path, n = args[0], int(args[1])
    entries = set(args[2:])
    out, heavy = figures(path, entries)
    if less and less[0] > 0:
        other = dict(figures(less[1], entries)[0])
        out = [(k, v - less[0] * other[k] / less[2]) for k, v in out]
    print(" ".join(f"{k} {v / n:.1f}" for k, v in out))
    for c, lay, f in heavy:
        if c * 20 >= n:
            print(f"  {c / n:8.1f} {lay:8s} {f[:160]}", file=sys.stderr)


if __name__ == "__main__":
    main()
