#!/usr/bin/env python3
# SPDX-License-Identifier: MIT OR Apache-2.0
# Part of dat2: ABI comparison of include/dat2 against Debian's /usr/include/dat2.
#
# Reads both header sets through the C preprocessor, builds an inventory of
# every name they declare (typedefs, struct/union/enum tags, members, enum
# constants, functions, macros) and writes one C program that prints the
# layout and value of all of it. run.sh compiles that program once against
# each header set and compares the two outputs.
#
#   gen_abi.py names  --ref ROOT --ours ROOT --work DIR [--cc CC]
#       compare the two inventories; exit 1 on any unexpected difference
#   gen_abi.py gen    --ref ROOT --ours ROOT --work DIR [--cc CC] --out FILE
#       write the comparison program
#   gen_abi.py copied --ref-dir DIR --ours-dir DIR
#       fail if a comment line of the reference headers appears in ours
#
# ROOT is an include root holding dat2/ ("/usr/include" for Debian's).
import argparse
import json
import os
import re
import subprocess
import sys

HEADERS_PROBE = """\
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <netinet/in.h>
#include <dat2/dat_ib_extensions.h>
"""

# Names whose Debian definition cannot be used at all (it fails to compile
# or names something that does not exist); ours is a working version, so
# the two are not compared here. fixed_macros.c checks ours instead.
DEVIATIONS = {
    "DAT_IA_HA_RELATED":
        "Debian: object-like, refers to a missing member ia_ha_related",
    "dat_ib_collective_set_clock":
        "Debian: uses undeclared user_contex and READ_CLOCK op",
    "dat_ib_collective_read_clock":
        "Debian: unbalanced parenthesis",
    "dat_ib_collective_gatherv":
        "Debian: uses recvbuf, which is not a parameter",
    "dat_ib_start_counter":
        "Debian: casts to undefined type DAT_COUNTER_TYPE",
    "dat_ib_stop_counter":
        "Debian: casts to undefined type DAT_COUNTER_TYPE",
    "dat_ib_collective_alltoallv":
        "Debian: uses senddispls, which is not a parameter",
}

KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do",
    "double", "else", "enum", "extern", "float", "for", "goto", "if",
    "inline", "int", "long", "register", "restrict", "return", "short",
    "signed", "sizeof", "static", "struct", "switch", "typedef", "union",
    "unsigned", "void", "volatile", "while", "_Bool", "_Complex",
    "__inline__", "__inline", "__restrict", "__restrict__", "__const",
    "__extension__", "__attribute__", "_Alignas", "_Atomic", "_Noreturn",
    "_Thread_local", "__signed__", "__volatile__",
}
BASIC = {"void", "char", "short", "int", "long", "float", "double", "signed",
         "unsigned", "_Bool", "_Complex", "__int128", "__signed__"}
QUALS = {"const", "volatile", "restrict", "__restrict", "__restrict__",
         "__const", "__volatile__", "_Atomic"}
STORAGE = {"typedef", "extern", "static", "__inline__", "inline", "__inline",
           "register", "auto", "_Thread_local", "__extension__", "_Noreturn"}

TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:\\.|[^"\\])*")
  | (?P<chr>'(?:\\.|[^'\\])*')
  | (?P<num>\.?\d(?:[eEpP][+-]|[0-9A-Za-z_.])*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<punct>\.\.\.|->|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||\+\+|--|
               [-+*/%&|^]=|\#\#|[{}()\[\];,.?:~!%^&*+\-/<>=|\#])
""", re.X)


def tokenize(text):
    out, pos = [], 0
    while pos < len(text):
        m = TOKEN_RE.match(text, pos)
        if not m:
            raise SystemExit("cannot tokenize near: %r" % text[pos:pos + 40])
        pos = m.end()
        if m.lastgroup != "ws":
            out.append(m.group())
    return out


def is_ident(t):
    return re.match(r"^[A-Za-z_]\w*$", t) is not None


def join(toks):
    """Token list to text with single spaces only where needed."""
    s = ""
    for t in toks:
        if s and (is_ident(s[-1]) or s[-1].isdigit() or s[-1] in "_\"'") \
                and (is_ident(t[0]) or t[0].isdigit() or t[0] in "_\"'"):
            s += " "
        elif s and t in ("*",) and s[-1] not in "(*":
            s += " "
        s += t
    return s


def matching(toks, i):
    """Index of the bracket closing the one at toks[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    open_t, close_t, depth = toks[i], pairs[toks[i]], 0
    for j in range(i, len(toks)):
        if toks[j] == open_t:
            depth += 1
        elif toks[j] == close_t:
            depth -= 1
            if depth == 0:
                return j
    raise SystemExit("unbalanced %s in %s" % (open_t, join(toks[i:i + 30])))


def split_top(toks, sep):
    parts, cur, depth = [], [], 0
    for t in toks:
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        if t == sep and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        parts.append(cur)
    return parts


# ---------------------------------------------------------------------------
# Preprocessing

def preprocess(cc, root, work, tag):
    """Run cc -E -dD over the probe; return (code tokens by file, macros,
    set of dat2 files seen)."""
    probe = os.path.join(work, "probe_%s.c" % tag)
    with open(probe, "w") as f:
        f.write(HEADERS_PROBE)
    cmd = [cc, "-E", "-dD", "-std=gnu11"]
    if root != "/usr/include":
        cmd += ["-I", root]
    cmd.append(probe)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit("preprocessing with %s failed:\n%s" % (root, res.stderr))
    prefix = os.path.join(os.path.realpath(root), "dat2") + "/"
    cur = None
    code = []          # (file, text) chunks from dat2 headers, in order
    macros = []        # dicts in definition order
    files = set()
    for line in res.stdout.split("\n"):
        m = re.match(r'^# \d+ "([^"]*)"', line)
        if m:
            path = m.group(1)
            real = os.path.realpath(path) if path.startswith("/") else path
            cur = real if real.startswith(prefix) else None
            if cur:
                files.add(os.path.basename(cur))
            continue
        if cur is None:
            continue
        if line.startswith("#define "):
            mm = re.match(r"^#define ([A-Za-z_]\w*)(\(([^)]*)\))?(?:\s(.*))?$", line)
            if not mm:
                raise SystemExit("cannot parse %r" % line)
            params = None
            if mm.group(2) is not None:
                params = [p.strip() for p in mm.group(3).split(",") if p.strip()]
            macros.append({"name": mm.group(1), "params": params,
                           "body": (mm.group(4) or "").strip(),
                           "file": os.path.basename(cur)})
            continue
        if line.startswith("#undef "):
            name = line.split()[1]
            macros = [m for m in macros if m["name"] != name]
            continue
        if line.startswith("#"):
            continue
        code.append(line)
    return tokenize("\n".join(code)), macros, files


# ---------------------------------------------------------------------------
# Declaration parser (enough C for these headers)

class Inventory:
    def __init__(self):
        self.typedefs = {}      # name -> dict(text, head, kind, order)
        self.aggs = []          # dicts: kind, tag, key, members, typedefs
        self.enums = []         # dicts: tag, key, consts
        self.functions = {}     # name -> dict(decl, params, variadic, inline, body_ids)
        self.macros = {}        # name -> dict(params, body, file)
        self.files = set()
        self.anon = 0


def parse_specifiers(inv, toks, i):
    """Parse declaration specifiers from toks[i]. Returns (spec tokens,
    index after them, aggregate or enum record if one was defined here)."""
    spec, seen_type, rec = [], False, None
    while i < len(toks):
        t = toks[i]
        if t == "__attribute__":
            i = matching(toks, i + 1) + 1
            continue
        if t in QUALS:
            spec.append(t)
            i += 1
            continue
        if t in BASIC:
            spec.append(t)
            seen_type = True
            i += 1
            continue
        if t in ("struct", "union", "enum"):
            kind = t
            i += 1
            tag = None
            if i < len(toks) and is_ident(toks[i]) and toks[i] not in KEYWORDS:
                tag = toks[i]
                i += 1
            if i < len(toks) and toks[i] == "{":
                end = matching(toks, i)
                body = toks[i + 1:end]
                if tag is None:
                    inv.anon += 1
                if kind == "enum":
                    rec = parse_enum_body(inv, tag, body)
                else:
                    rec = parse_agg_body(inv, kind, tag, body)
                i = end + 1
            spec += [kind, tag if tag else "<anon>"]
            seen_type = True
            continue
        if is_ident(t) and t not in KEYWORDS and not seen_type:
            spec.append(t)
            seen_type = True
            i += 1
            continue
        break
    return spec, i, rec


def declarator_name(d):
    """(name, index) of the identifier a declarator declares, or (None, None)."""
    prev, k, bdepth = None, 0, 0
    while k < len(d):
        t = d[k]
        if t == "[":
            bdepth += 1
        elif t == "]":
            bdepth -= 1
        elif bdepth == 0 and t == "(" and prev is not None and \
                (prev in (")", "]") or (is_ident(prev) and prev not in KEYWORDS)):
            k = matching(d, k)  # parameter list
            prev = ")"
            k += 1
            continue
        elif bdepth == 0 and is_ident(t) and t not in KEYWORDS:
            return t, k
        prev = t
        k += 1
    return None, None


def param_list(d, name_idx):
    """Parameter tokens of a function (or pointer to function) declarator."""
    j = name_idx + 1 if name_idx is not None else 0
    if name_idx is None:
        # abstract: first "(" that follows ")" or starts a list after "*)"
        for k in range(len(d)):
            if d[k] == "(" and k > 0 and d[k - 1] == ")":
                j = k
                break
        else:
            return None
    while j < len(d) and d[j] == ")":
        j += 1
    if j < len(d) and d[j] == "(":
        end = matching(d, j)
        return d[j + 1:end]
    return None


def parse_params(inv, ptoks):
    if ptoks is None:
        return None, False
    if ptoks == ["void"] or not ptoks:
        return [], False
    out, variadic = [], False
    for p in split_top(ptoks, ","):
        if p == ["..."]:
            variadic = True
            continue
        spec, k, _ = parse_specifiers(inv, p, 0)
        decl = p[k:]
        name, idx = declarator_name(decl)
        abstract = decl[:idx] + decl[idx + 1:] if name else decl
        out.append({"spec": spec, "decl": decl, "name": name,
                    "type": join(spec + abstract)})
    return out, variadic


def parse_agg_body(inv, kind, tag, body):
    key = "%s %s" % (kind, tag) if tag else "%s <anon%d>" % (kind, inv.anon)
    rec = {"kind": kind, "tag": tag, "key": key, "members": [], "typedefs": []}
    for mdecl in split_top(body, ";"):
        if not mdecl:
            continue
        spec, k, sub = parse_specifiers(inv, mdecl, 0)
        decls = split_top(mdecl[k:], ",")
        if not decls:
            # anonymous struct/union member: its fields belong to us
            if sub is not None and sub.get("members") is not None:
                for m in sub["members"]:
                    rec["members"].append(dict(m))
            continue
        for d in decls:
            if ":" in d:
                d = d[:d.index(":")]
            name, idx = declarator_name(d)
            if name is None:
                raise SystemExit("member without name in %s" % key)
            abstract = d[:idx] + d[idx + 1:]
            inline_body = sub is not None and spec[-1] == "<anon>"
            rec["members"].append({
                "path": name,
                "type": None if inline_body else join(spec + abstract),
            })
            if inline_body and sub.get("members") is not None and not abstract:
                for m in sub["members"]:
                    mm = dict(m)
                    mm["path"] = name + "." + m["path"]
                    rec["members"].append(mm)
    inv.aggs.append(rec)
    return rec


def parse_enum_body(inv, tag, body):
    key = "enum %s" % tag if tag else "enum <anon%d>" % inv.anon
    rec = {"tag": tag, "key": key, "consts": [], "typedefs": []}
    for e in split_top(body, ","):
        if e:
            rec["consts"].append(e[0])
    inv.enums.append(rec)
    return rec


def parse_items(inv, toks):
    i, depth, start = 0, 0, 0
    items = []
    while i < len(toks):
        t = toks[i]
        if t == "{" and depth == 0 and i > 0 and toks[i - 1] == ")":
            end = matching(toks, i)
            items.append((toks[start:i], toks[i + 1:end]))
            i = end + 1
            start = i
            continue
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif t == ";" and depth == 0:
            items.append((toks[start:i], None))
            start = i + 1
        i += 1
    for item, body in items:
        storage = set()
        k = 0
        while k < len(item) and item[k] in STORAGE:
            storage.add(item[k])
            k += 1
        spec, k, rec = parse_specifiers(inv, item, k)
        for d in split_top(item[k:], ","):
            name, idx = declarator_name(d)
            if name is None:
                continue
            abstract = d[:idx] + d[idx + 1:]
            if "typedef" in storage:
                head = None
                if len(spec) >= 2 and spec[-2] in ("struct", "union", "enum") \
                        and not abstract:
                    head = join(spec[-2:])
                inv.typedefs[name] = {"text": join(spec + abstract), "head": head,
                                      "spec": spec, "abstract": abstract,
                                      "anon": spec[-1:] == ["<anon>"]}
                if rec is not None and not abstract:
                    rec["typedefs"].append(name)
                continue
            if idx + 1 < len(d) and d[idx + 1] == "(":
                params, variadic = parse_params(inv, param_list(d, idx))
                decl_toks = item + [";"]
                body_ids = []
                if body is not None:
                    body_ids = [x for x in body if is_ident(x)]
                inv.functions[name] = {
                    "decl": join(decl_toks), "params": params,
                    "variadic": variadic, "inline": body is not None,
                    "ret": join(spec + d[:idx]), "body_ids": body_ids,
                }


def typedef_kind(inv, name, depth=0):
    td = inv.typedefs.get(name)
    if td is None or depth > 20:
        return "arith"   # system typedef (u_int32_t and friends)
    abstract = td["abstract"]
    if "(" in abstract and "*" in abstract:
        return "funcptr"
    if "*" in abstract:
        return "ptr"
    if "[" in abstract:
        return "array"
    if "(" in abstract:
        return "func"
    spec = [t for t in td["spec"] if t not in QUALS]
    if spec and spec[0] in ("struct", "union"):
        return "agg"
    if spec and spec[0] == "enum":
        return "enum"
    if len(spec) == 1 and spec[0] not in BASIC:
        return typedef_kind(inv, spec[0], depth + 1)
    return "arith"


def build(cc, root, work, tag):
    inv = Inventory()
    toks, macros, files = preprocess(cc, root, work, tag)
    inv.files = files
    parse_items(inv, toks)
    for m in macros:
        inv.macros[m["name"]] = m
    return inv


# ---------------------------------------------------------------------------
# Inventory comparison

def inventory_set(inv):
    s = set()
    for name, td in inv.typedefs.items():
        s.add(("typedef", name, td["head"] or ""))
    for a in inv.aggs:
        if a["tag"]:
            s.add(("tag", a["key"]))
        key = a["key"] if a["tag"] else "/".join(sorted(a["typedefs"])) or None
        if key is None:
            continue   # nested anonymous: seen through the parent's members
        for idx, m in enumerate(a["members"]):
            s.add(("member", key, idx, m["path"], m["type"] or "<inline>"))
    for e in inv.enums:
        key = e["key"] if e["tag"] else "/".join(sorted(e["typedefs"]))
        if e["tag"]:
            s.add(("tag", e["key"]))
        for c in e["consts"]:
            s.add(("enumconst", key, c))
    for name, f in inv.functions.items():
        s.add(("function", name, "inline" if f["inline"] else "extern",
               len(f["params"] or []), "variadic" if f["variadic"] else ""))
    for name, m in inv.macros.items():
        if name in DEVIATIONS:
            s.add(("macro", name, "deviation"))
        else:
            s.add(("macro", name,
                   "obj" if m["params"] is None else "fn/%d" % len(m["params"])))
    return s


def counts(inv):
    members = sum(len(a["members"]) for a in inv.aggs
                  if a["tag"] or a["typedefs"])
    return {
        "aggregates": sum(1 for a in inv.aggs if a["tag"] or a["typedefs"]),
        "members": members,
        "typedefs": len(inv.typedefs),
        "enums": len(inv.enums),
        "enum_constants": sum(len(e["consts"]) for e in inv.enums),
        "functions": len(inv.functions),
        "macros": len(inv.macros),
    }


def cmd_names(args):
    ref = build(args.cc, args.ref, args.work, "ref")
    ours = build(args.cc, args.ours, args.work, "ours")
    a, b = inventory_set(ref), inventory_set(ours)
    missing, extra = sorted(a - b, key=str), sorted(b - a, key=str)
    for x in missing:
        print("missing in ours: %s" % (x,))
    for x in extra:
        print("extra in ours:   %s" % (x,))
    c = counts(ref)
    print("inventory: " + " ".join("%s=%d" % kv for kv in c.items()))
    with open(os.path.join(args.work, "counts.json"), "w") as f:
        json.dump(c, f)
    return 1 if (missing or extra) else 0


# ---------------------------------------------------------------------------
# Program generation

PRELUDE = r"""/* Generated by c-tests/abi/gen_abi.py; do not edit. */
#include <stdio.h>
#include <string.h>
#include <stddef.h>
#include <stdarg.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>

#define DAT2T_STR_(...) #__VA_ARGS__
#define DAT2T_STR(...) DAT2T_STR_(__VA_ARGS__)

#define DAT2T_TN(x) _Generic((x), \
    _Bool: "_Bool", char: "char", signed char: "schar", \
    unsigned char: "uchar", short: "short", unsigned short: "ushort", \
    int: "int", unsigned int: "uint", long: "long", unsigned long: "ulong", \
    long long: "llong", unsigned long long: "ullong", float: "float", \
    double: "double", long double: "ldouble", char *: "char*", \
    const char *: "const char*", void *: "void*", const void *: "const void*", \
    default: "other")

/* Prints bytes, collapsing runs of one repeated byte. */
static void dat2t_bytes(const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    size_t i, same = 1;
    for (i = 1; i < n; i++)
        if (b[i] != b[0])
            same = 0;
    if (n && same) {
        printf("%02x*%zu", b[0], n);
        return;
    }
    for (i = 0; i < n; i++)
        printf("%02x", b[i]);
}

static unsigned long long dat2t_bits(const void *p, size_t n)
{
    unsigned long long v = 0;
    memcpy(&v, p, n < sizeof v ? n : sizeof v);
    return v;
}

/* A pointer we filled with one repeated byte is printed; real addresses,
 * which differ from run to run, are only reported as null or not. */
static void dat2t_ptr(const void *p)
{
    unsigned long long v = 0;
    unsigned char b[sizeof v];
    size_t i, same = 1;
    memcpy(&v, &p, sizeof p);
    memcpy(b, &v, sizeof v);
    for (i = 1; i < sizeof v; i++)
        if (b[i] != b[0])
            same = 0;
    if (v == 0)
        printf("null");
    else if (same || v < 0x10000)
        printf("0x%llx", v);
    else
        printf("addr");
}

static int dat2t_is_ident(const char *s)
{
    if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
        return 0;
    for (; *s; s++)
        if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')
              || (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

/* Token text with spaces kept only between two word characters. */
static void dat2t_tokens(const char *s)
{
    char prev = 0;
    putchar('"');
    for (; *s; s++) {
        if (*s == ' ') {
            const char *n = s + 1;
            int wp = prev == '_' || (prev >= '0' && prev <= '9') ||
                     (prev >= 'A' && prev <= 'Z') || (prev >= 'a' && prev <= 'z');
            int wn = *n == '_' || (*n >= '0' && *n <= '9') ||
                     (*n >= 'A' && *n <= 'Z') || (*n >= 'a' && *n <= 'z');
            if (wp && wn)
                putchar(' ');
            continue;
        }
        putchar(*s);
        prev = *s;
    }
    putchar('"');
}

/* One argument received by a stub: pointers via dat2t_ptr, the rest as bytes. */
static void dat2t_arg(const char *name, const void *p, size_t n, int cls)
{
    printf("    %s ", name);
    if (cls == 5 && n == sizeof(void *)) {
        const void *v;
        memcpy(&v, p, sizeof v);
        dat2t_ptr(v);
    } else {
        dat2t_bytes(p, n);
    }
    printf(" size=%zu\n", n);
}

static void dat2t_value(const char *tn, int cls, size_t sz, const void *p,
                        const char *text, int full)
{
    printf("%s cls=%d size=%zu ", tn, cls, sz);
    if (cls == 5) {
        const void *v;
        memcpy(&v, p, sizeof v);
        if (full)
            printf("0x%llx", dat2t_bits(p, sz));
        else
            dat2t_ptr(v);
        if (dat2t_is_ident(text))
            printf(" name=%s", text);
    } else if (cls == 1 || cls == 2 || cls == 4) {
        printf("0x%llx", dat2t_bits(p, sz));
    } else {
        dat2t_bytes(p, sz);
    }
    putchar('\n');
}

#define DAT2T_INT(label, x) \
    printf("%s %s size=%zu 0x%llx\n", label, DAT2T_TN(x), sizeof(x), \
           (unsigned long long)(x))
#define DAT2T_STRING(label, x) \
    printf("%s string size=%zu \"%s\"\n", label, sizeof(x), x)
/* full: the value is computed from our own constants, so print pointers
 * in full; otherwise it may be a real address. */
#define DAT2T_EXPR_(label, full, ...) do { \
    __auto_type dat2t_v = (__VA_ARGS__); \
    printf("%s ", label); \
    dat2t_value(DAT2T_TN(dat2t_v), __builtin_classify_type(dat2t_v), \
                sizeof dat2t_v, &dat2t_v, DAT2T_STR(__VA_ARGS__), full); \
} while (0)
#define DAT2T_EXPR(label, ...) DAT2T_EXPR_(label, 0, __VA_ARGS__)
#define DAT2T_VALUE(label, ...) DAT2T_EXPR_(label, 1, __VA_ARGS__)
#define DAT2T_TOKENS(label, ...) do { \
    printf("%s tokens ", label); dat2t_tokens(DAT2T_STR(__VA_ARGS__)); \
    putchar('\n'); } while (0)
"""

EXT_INTERCEPT = r"""
/* Every dat_extension_op() written by a macro below lands here instead, so
 * the program sees the type, size and value of each argument. */
struct dat2t_arg { const char *tn; int cls; size_t size; unsigned long long bits; };
static struct dat2t_arg dat2t_mkarg(const char *tn, int cls, size_t size,
                                    unsigned long long bits)
{
    struct dat2t_arg a;
    a.tn = tn; a.cls = cls; a.size = size; a.bits = bits;
    return a;
}
static DAT_RETURN dat2t_xop(int n, const struct dat2t_arg *a)
{
    int i;
    printf("  dat_extension_op(%d args)\n", n);
    for (i = 0; i < n; i++)
        printf("    arg%d %s cls=%d size=%zu 0x%llx\n", i, a[i].tn, a[i].cls,
               a[i].size, a[i].bits);
    return 0x5eed;
}
#define DAT2T_XA(x) dat2t_mkarg(DAT2T_TN(x), __builtin_classify_type(x), \
    sizeof(x), ({ __typeof__(x) dat2t_t = (x); \
                  dat2t_bits(&dat2t_t, sizeof dat2t_t); }))
#define DAT2T_NARGS(...) DAT2T_NARGS_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, \
    10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define DAT2T_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, \
    a14, a15, a16, n, ...) n
#define DAT2T_CAT(a, b) DAT2T_CAT_(a, b)
#define DAT2T_CAT_(a, b) a##b
#define DAT2T_EACH(...) DAT2T_CAT(DAT2T_E, DAT2T_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define DAT2T_E1(a) DAT2T_XA(a)
#define DAT2T_E2(a, ...) DAT2T_XA(a), DAT2T_E1(__VA_ARGS__)
#define DAT2T_E3(a, ...) DAT2T_XA(a), DAT2T_E2(__VA_ARGS__)
#define DAT2T_E4(a, ...) DAT2T_XA(a), DAT2T_E3(__VA_ARGS__)
#define DAT2T_E5(a, ...) DAT2T_XA(a), DAT2T_E4(__VA_ARGS__)
#define DAT2T_E6(a, ...) DAT2T_XA(a), DAT2T_E5(__VA_ARGS__)
#define DAT2T_E7(a, ...) DAT2T_XA(a), DAT2T_E6(__VA_ARGS__)
#define DAT2T_E8(a, ...) DAT2T_XA(a), DAT2T_E7(__VA_ARGS__)
#define DAT2T_E9(a, ...) DAT2T_XA(a), DAT2T_E8(__VA_ARGS__)
#define DAT2T_E10(a, ...) DAT2T_XA(a), DAT2T_E9(__VA_ARGS__)
#define DAT2T_E11(a, ...) DAT2T_XA(a), DAT2T_E10(__VA_ARGS__)
#define DAT2T_E12(a, ...) DAT2T_XA(a), DAT2T_E11(__VA_ARGS__)
#define DAT2T_E13(a, ...) DAT2T_XA(a), DAT2T_E12(__VA_ARGS__)
#define DAT2T_E14(a, ...) DAT2T_XA(a), DAT2T_E13(__VA_ARGS__)
#define DAT2T_E15(a, ...) DAT2T_XA(a), DAT2T_E14(__VA_ARGS__)
#define DAT2T_E16(a, ...) DAT2T_XA(a), DAT2T_E15(__VA_ARGS__)
#define dat_extension_op(...) dat2t_xop(DAT2T_NARGS(__VA_ARGS__), \
    (const struct dat2t_arg[]){ DAT2T_EACH(__VA_ARGS__) })
"""


SAMPLES = ("0x4006002a", "0xc005fedc", "0xffffffff", "0")


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def pattern(i):
    """Fill byte for the i-th argument: distinct and never zero."""
    return (0x11 * (i + 1)) & 0xff if i < 15 else (0x21 + 7 * i) & 0xff


class Gen:
    def __init__(self, ref, ours, cc, work):
        self.ref, self.ours, self.cc, self.work = ref, ours, cc, work
        # the union of names, described by Debian's definition when it has one
        self.macros = dict(ours.macros)
        self.macros.update(ref.macros)
        self.functions = dict(ours.functions)
        self.functions.update(ref.functions)
        self.typedefs = dict(ours.typedefs)
        self.typedefs.update(ref.typedefs)
        self.kind_inv = {n: (ref if n in ref.typedefs else ours) for n in self.typedefs}
        self.aggs = self._union(ref.aggs, ours.aggs, lambda a: a["key"] if a["tag"]
                                else "/".join(sorted(a["typedefs"])))
        self.enums = self._union(ref.enums, ours.enums, lambda e: e["key"] if e["tag"]
                                 else "/".join(sorted(e["typedefs"])))

    @staticmethod
    def _union(a, b, key):
        seen, out = set(), []
        for x in a + b:
            k = key(x)
            if not k or k in seen:
                continue
            seen.add(k)
            out.append(x)
        return out

    # -- macro classification by trial compilation ------------------------

    def _trial(self, early, late, scope="fn"):
        """Compile probes; early/late are lists of (id, line text). Returns
        (whether it compiled, ids of the probes an error was traced to)."""
        src = [PRELUDE]
        lines_of = {}

        def emit(probes):
            if scope == "fn":
                src.append("void dat2t_trial_%d(void);\n" % len(src))
                src.append("void dat2t_trial_%d(void)\n{\n" % (len(src) - 1))
            for pid, text in probes:
                lines_of[sum(s.count("\n") for s in src) + 1] = pid
                src.append(text + "\n")
            if scope == "fn":
                src.append("}\n")

        emit(early)
        src.append("#include <netinet/in.h>\n#include <dat2/dat_ib_extensions.h>\n")
        emit(late)
        path = os.path.join(self.work, "trial.c")
        with open(path, "w") as f:
            f.write("".join(src))
        cmd = [self.cc, "-fsyntax-only", "-std=gnu11", "-fmax-errors=0",
               "-Werror=int-to-pointer-cast", "-Werror=pointer-to-int-cast",
               "-Werror=int-conversion", "-Werror=incompatible-pointer-types", path]
        if self.trial_root != "/usr/include":
            cmd[1:1] = ["-I", self.trial_root]
        res = subprocess.run(cmd, capture_output=True, text=True)
        # An error inside a macro expansion may be reported at the header
        # line, with notes leading back to the probe line; it may also come
        # with no such note, which _classify handles by bisecting.
        bad, pending = set(), None
        for line in res.stderr.split("\n"):
            m = re.match(r"^(.*?):(\d+):\d+: (error|note|warning): ", line)
            if not m:
                continue
            here = int(m.group(2)) if m.group(1).endswith("trial.c") else None
            if m.group(3) != "note":
                pending = m.group(3) == "error"
                if pending and here in lines_of:
                    bad.add(lines_of[here])
                    pending = False
            elif pending and here in lines_of:
                bad.add(lines_of[here])
                pending = False
        return res.returncode == 0, bad

    def _classify(self, names, probe_fmt, root, scope="fn"):
        """Names for which probe_fmt compiles. A batch counts only when it
        compiles cleanly; otherwise the probes that errors were traced to and
        the rest are retried apart, and a batch with errors traced to none of
        its probes is halved."""
        self.trial_root = root
        good = set()

        def solve(batch):
            if not batch:
                return
            early = [(n, probe_fmt(n)) for n in batch if not self._late(n)]
            late = [(n, probe_fmt(n)) for n in batch if self._late(n)]
            ok, bad = self._trial(early, late, scope=scope)
            if ok:
                good.update(batch)
            elif len(batch) == 1 or len(bad) == len(batch):
                return      # every probe failed on its own line
            elif bad:
                solve([n for n in batch if n not in bad])
                solve([n for n in batch if n in bad])
            else:
                half = len(batch) // 2
                solve(batch[:half])
                solve(batch[half:])

        solve(list(names))
        return good

    def _late(self, name):
        m = self.macros.get(name)
        return m is not None and m["file"] == "dat_ib_extensions.h"

    def classify_macros(self):
        obj = [n for n, m in self.macros.items()
               if m["params"] is None and n not in DEVIATIONS]
        self.mclass = {}
        for group, root in ((self.ref, self.ref_root), (self.ours, self.ours_root)):
            names = [n for n in obj if n in group.macros and n not in self.mclass]
            ints = self._classify(names, lambda n: "enum { dat2t_i_%s = (int)((%s) * 0) };" % (n, n), root)
            rest = [n for n in names if n not in ints]
            strs = self._classify(rest, lambda n: "{ const char *dat2t_p = (%s); static const char dat2t_s[] = %s \"\"; (void)dat2t_p; (void)dat2t_s; }" % (n, n), root)
            rest = [n for n in rest if n not in strs]
            exprs = self._classify(rest, lambda n: "{ __auto_type dat2t_v = (%s); (void)dat2t_v; }" % n, root)
            for n in names:
                self.mclass[n] = ("int" if n in ints else "string" if n in strs
                                  else "expr" if n in exprs else "tokens")
        # function-like macros that compute a value: try plain literal
        # arguments, then arguments typed unsigned long; else arity only
        fn = [n for n, m in self.macros.items()
              if m["params"] is not None and self.fn_family(n) == "value"]
        self.fclass = {}
        for group, root in ((self.ref, self.ref_root), (self.ours, self.ours_root)):
            names = [n for n in fn if n in group.macros and n not in self.fclass]
            for style in ("plain", "typed"):
                # at file scope, so only constant values qualify
                ok = self._classify(
                    names, lambda n, st=style: "static __auto_type dat2t_fv_%s = %s;"
                    % (n, self.value_call(n, SAMPLES[0], st)), root, scope="file")
                for n in ok:
                    self.fclass[n] = style
                names = [n for n in names if n not in ok]
            for n in names:
                self.fclass[n] = "arity"

    # -- pieces of the program -------------------------------------------

    def macro_probe(self, n):
        c = self.mclass[n]
        label = c_str("macro " + n)
        if c == "int":
            return "    DAT2T_INT(%s, %s);" % (label, n)
        if c == "string":
            return "    DAT2T_STRING(%s, %s);" % (label, n)
        if c == "expr":
            return "    DAT2T_EXPR(%s, %s);" % (label, n)
        return "    DAT2T_TOKENS(%s, %s);" % (label, n)

    def fn_family(self, n):
        m = self.macros[n]
        body = m["body"]
        if n in DEVIATIONS:
            return "deviation"
        if "DAT_HANDLE_TO_PROVIDER" in body and re.search(r"->\s*(\w+_func)\b", body):
            return "dispatch"
        if re.search(r"\bdat_extension_op\b", body):
            return "ext"
        called = [f for f in re.findall(r"\b([A-Za-z_]\w*)\s*\(", body)
                  if f in self.functions]
        if called:
            return "call:" + called[0]
        return "value"

    def named_params(self, params, prefix="p"):
        out = []
        for i, p in enumerate(params):
            if p["name"]:
                out.append((join(p["spec"] + p["decl"]), p["name"], p))
                continue
            if any(t in ("(", "[") for t in p["decl"]):
                raise SystemExit("cannot name parameter %s" % p["type"])
            nm = "%s%d" % (prefix, i)
            out.append((p["type"] + " " + nm, nm, p))
        return out

    def stub(self, fname, ret, params, label, variadic=False):
        """A function definition that prints its arguments."""
        np = self.named_params(params)
        sig = ", ".join(d for d, _, _ in np) or "void"
        if variadic:
            sig += ", ..."
        lines = ["%s %s(%s)" % (ret, fname, sig), "{"]
        lines.append('    printf("  called %%s\\n", %s);' % c_str(label))
        for d, nm, p in np:
            if p["type"] == "va_list":
                lines.append('    printf("    %s va_arg 0x%%llx\\n", va_arg(%s, unsigned long long));' % (nm, nm))
                continue
            lines.append('    dat2t_arg("%s", &%s, sizeof %s, __builtin_classify_type(%s));'
                         % (nm, nm, nm, nm))
        if ret.strip() != "void":
            lines.append("    return (%s)0x7eed;" % ret)
        lines.append("}")
        return "\n".join(lines) + "\n"

    def arg_vars(self, params, tag):
        """Declarations of pattern-filled variables for a call."""
        decl, names = [], []
        for i, p in enumerate(params):
            if p["type"] == "va_list":
                names.append("dat2t_ap")
                continue
            v = "%s_%d" % (tag, i)
            decl.append("    union { unsigned char b[sizeof(%s)]; %s v; } %s;"
                        % (p["type"], p["type"], v))
            decl.append("    memset(%s.b, 0x%02x, sizeof %s.b);" % (v, pattern(i), v))
            names.append("%s.v" % v)
        return decl, names

    def generate(self):
        ref, ours = self.ref, self.ours
        out = [PRELUDE]

        # early macro probes (everything not from dat_ib_extensions.h)
        obj = [n for n, m in self.macros.items() if m["params"] is None]
        early = [n for n in obj if not self._late(n)]
        late = [n for n in obj if self._late(n)]
        out.append("static void dat2t_macros_early(void)\n{\n")
        for n in early:
            out.append(self.macro_probe(n) + "\n" if n not in DEVIATIONS
                       else self.deviation(n))
        out.append("}\n\n")

        # value-like function macros from the early headers
        fvals = [n for n, m in self.macros.items()
                 if m["params"] is not None and self.fn_family(n) == "value"]
        out.append("static void dat2t_fmacros_early(void)\n{\n")
        for n in fvals:
            if not self._late(n):
                out.append(self.value_macro(n))
        out.append("}\n\n")

        out.append("#include <netinet/in.h>\n#include <dat2/dat_ib_extensions.h>\n\n")

        # prototypes, redeclared as Debian spells them
        out.append("/* Prototypes: a redeclaration with a different type does not compile. */\n")
        for n, f in self.functions.items():
            out.append(f["decl"] + "\n")
        out.append("\n")
        stubbed = set()
        for n, m in self.macros.items():
            fam = self.fn_family(n) if m["params"] is not None else None
            if fam and fam.startswith("call:"):
                stubbed.add(fam[5:])
        for n, f in self.functions.items():
            if f["inline"]:
                for x in f["body_ids"]:
                    if x in self.functions and not self.functions[x]["inline"]:
                        stubbed.add(x)
        for n, f in self.functions.items():
            if not f["inline"] and n not in stubbed:
                out.append("#pragma weak %s\n" % n)
        for n in sorted(stubbed):
            f = self.functions[n]
            out.append(self.stub(n, f["ret"].replace(n, "").strip() or "DAT_RETURN",
                                 f["params"], n, f["variadic"]))

        # typedefs
        out.append("\n/* Typedefs name the same types as Debian's. */\n")
        for n, td in self.typedefs.items():
            if td["anon"]:
                continue
            out.append("_Static_assert(__builtin_types_compatible_p(%s, %s), %s);\n"
                       % (n, td["text"], c_str("typedef " + n)))
        # members
        out.append("\n/* Members have the same types as Debian's. */\n")
        for a in self.aggs:
            tname = self.agg_name(a)
            if tname is None:
                continue
            for m in a["members"]:
                if m["type"] is None:
                    continue
                out.append("_Static_assert(__builtin_types_compatible_p(__typeof__(((%s *)0)->%s), %s), %s);\n"
                           % (tname, m["path"], m["type"], c_str("member %s.%s" % (tname, m["path"]))))

        out.append("\nstatic void dat2t_macros_late(void)\n{\n")
        for n in late:
            out.append(self.macro_probe(n) + "\n" if n not in DEVIATIONS
                       else self.deviation(n))
        for n in fvals:
            if self._late(n):
                out.append(self.value_macro(n))
        out.append("}\n\n")

        out.append(self.layout())
        out.append(self.enum_values())
        out.append(self.proto_list())
        out.append(self.inline_calls())
        out.append(self.call_macros())
        out.append(self.dispatch())
        out.append(EXT_INTERCEPT)
        out.append(self.ext_macros())
        out.append(self.other_fmacros())

        out.append("int main(void)\n{\n")
        for fn in ("dat2t_macros_early", "dat2t_fmacros_early", "dat2t_macros_late",
                   "dat2t_layout", "dat2t_enums", "dat2t_protos", "dat2t_inline",
                   "dat2t_calls", "dat2t_dispatch", "dat2t_ext", "dat2t_fmacros"):
            out.append("    %s();\n" % fn)
        out.append("    return 0;\n}\n")
        return "".join(out)

    @staticmethod
    def deviation(n):
        return '    printf("%%s\\n", %s);\n' % c_str("deviation %s (%s)" % (n, DEVIATIONS[n]))

    def agg_name(self, a):
        if a["tag"]:
            return a["key"]
        if a["typedefs"]:
            return sorted(a["typedefs"])[0]
        return None

    def value_call(self, n, sample, style):
        k = len(self.macros[n]["params"])
        arg = sample if style == "plain" else "((unsigned long)%s)" % sample
        return "%s(%s)" % (n, ", ".join([arg] * k))

    def value_macro(self, n):
        k = len(self.macros[n]["params"])
        style = self.fclass[n]
        if style == "arity":
            args = ", ".join("dat2t_a%d" % i for i in range(k))
            return ('    printf("fmacro %s/%d arity only %%d\\n", (int)(sizeof(DAT2T_STR(%s(%s))) > 0));\n'
                    % (n, k, n, args))
        out = []
        for sample in SAMPLES:
            out.append("    DAT2T_VALUE(%s, %s);\n"
                       % (c_str("fmacro %s/%d(%s)" % (n, k, sample)),
                          self.value_call(n, sample, style)))
        return "".join(out)

    def layout(self):
        o = ["static void dat2t_layout(void)\n{\n"]
        for a in self.aggs:
            t = self.agg_name(a)
            if t is None:
                continue
            label = t if a["tag"] else a["kind"] + " " + t
            o.append('    printf("%s size=%%zu align=%%zu\\n", sizeof(%s), __alignof__(%s));\n'
                     % (label, t, t))
            for m in a["members"]:
                o.append('    printf("  %s off=%%zu size=%%zu align=%%zu\\n", offsetof(%s, %s), '
                         'sizeof(((%s *)0)->%s), __alignof__(((%s *)0)->%s));\n'
                         % (m["path"], t, m["path"], t, m["path"], t, m["path"]))
        for n, td in self.typedefs.items():
            kind = typedef_kind(self.kind_inv[n], n)
            if kind == "func":
                o.append('    printf("typedef %s function type\\n");\n' % n)
                continue
            o.append('    printf("typedef %s kind=%s size=%%zu align=%%zu\\n", sizeof(%s), __alignof__(%s));\n'
                     % (n, kind, n, n))
            if kind in ("arith", "enum"):
                o.append('    printf("  signed=%%d\\n", (int)((%s)-1 < (%s)1));\n' % (n, n))
        o.append("}\n\n")
        return "".join(o)

    def enum_values(self):
        o = ["static void dat2t_enums(void)\n{\n"]
        for e in self.enums:
            key = e["key"] if e["tag"] else "/".join(sorted(e["typedefs"]))
            if e["tag"]:
                o.append('    printf("%s size=%%zu signed=%%d\\n", sizeof(%s), (int)((%s)-1 < (%s)1));\n'
                         % (key, key, key, key))
            for c in e["consts"]:
                o.append('    DAT2T_INT(%s, %s);\n' % (c_str("enumconst %s %s" % (key, c)), c))
        o.append("}\n\n")
        return "".join(o)

    def proto_list(self):
        o = ["static void dat2t_protos(void)\n{\n"]
        for n, f in self.functions.items():
            o.append('    printf("function %s %s params=%d%s\\n");\n'
                     % (n, "inline" if f["inline"] else "extern",
                        len(f["params"] or []), " variadic" if f["variadic"] else ""))
        o.append("}\n\n")
        return "".join(o)

    def inline_calls(self):
        o = ["static void dat2t_inline(void)\n{\n"]
        if "dat_strerror_extension" in self.functions:
            for v in ("DAT_IB_ERR", "DAT_IB_COLLECTIVE_ERR", "0x80060025",
                      "0x10000005", "0x3fff0000", "0"):
                o.append('    { const char *s = "init"; DAT_RETURN r = dat_strerror_extension((DAT_IB_RETURN)(%s), &s);\n'
                         '      printf("dat_strerror_extension(%s) = 0x%%x \\"%%s\\"\\n", (unsigned)r, s); }\n' % (v, v))
        if "dat_strerror_ext_status" in self.functions:
            for v in ("DAT_OP_SUCCESS", "DAT_IB_OP_ERR", "DAT_IB_COLL_COMP_ERR", "7"):
                o.append('    { const char *s = "init"; DAT_RETURN r = dat_strerror_ext_status((DAT_IB_STATUS)(%s), &s);\n'
                         '      printf("dat_strerror_ext_status(%s) = 0x%%x \\"%%s\\"\\n", (unsigned)r, s); }\n' % (v, v))
        o.append("}\n\n")
        return "".join(o)

    def call_macros(self):
        o = ["static void dat2t_calls(void)\n{\n"]
        for n, m in self.macros.items():
            if m["params"] is None:
                continue
            fam = self.fn_family(n)
            if not fam.startswith("call:"):
                continue
            f = self.functions[fam[5:]]
            k = len(m["params"])
            decl, names = self.arg_vars(f["params"][:k], "c")
            o.append("    {\n" + "\n".join(decl) + "\n")
            o.append('        printf("fmacro %s/%d\\n");\n' % (n, k))
            o.append("        DAT_RETURN r = %s(%s);\n" % (n, ", ".join(names)))
            o.append('        printf("  -> 0x%x\\n", (unsigned)r);\n    }\n')
        o.append("}\n\n")
        return "".join(o)

    def provider_fields(self):
        for a in self.aggs:
            if a["key"] == "struct dat_provider":
                return a["members"]
        return []

    def dispatch(self):
        o = []
        o.append("/* The default DAT_HANDLE_TO_PROVIDER reads the first word of the object. */\n")
        o.append("static void dat2t_h2p(void)\n{\n"
                 "    static DAT_PROVIDER prov;\n    DAT_PROVIDER *pp = &prov;\n"
                 "    void *h = &pp;\n"
                 '    printf("DAT_HANDLE_TO_PROVIDER default ok=%d\\n", DAT_HANDLE_TO_PROVIDER(h) == &prov);\n}\n\n')
        o.append("#undef DAT_HANDLE_TO_PROVIDER\n"
                 "static DAT_PROVIDER dat2t_fake;\n"
                 "static DAT_PROVIDER *dat2t_fakep = &dat2t_fake;\n"
                 "static DAT_PROVIDER **dat2t_slot(const void *h)\n{\n"
                 '    printf("  dispatch via "); dat2t_ptr(h); putchar(\'\\n\');\n'
                 "    return &dat2t_fakep;\n}\n"
                 "#define DAT_HANDLE_TO_PROVIDER(h) (*dat2t_slot((const void *)(h)))\n\n")
        fields = {}
        for m in self.provider_fields():
            td = self.typedefs.get(m["type"] or "")
            if td is None:
                continue
            inv = self.kind_inv[m["type"]]
            params, variadic = parse_params(inv, param_list(td["abstract"], None))
            if params is None:
                continue
            ret = join(td["spec"])
            fields[m["path"]] = params
            o.append(self.stub("dat2t_stub_" + m["path"], ret, params, m["path"], variadic))
        o.append("static void dat2t_fill(void)\n{\n")
        for f in fields:
            o.append("    dat2t_fake.%s = dat2t_stub_%s;\n" % (f, f))
        o.append("}\n\n")
        calls = []
        for n, m in self.macros.items():
            if m["params"] is None or self.fn_family(n) != "dispatch":
                continue
            field = re.search(r"->\s*(\w+_func)\b", m["body"]).group(1)
            params = fields.get(field)
            k = len(m["params"])
            fn = "dat2t_d_%s" % n
            calls.append(fn)
            if params is None or len(params) != k:
                o.append('static void %s(void) { printf("fmacro %s/%d dispatch %s unchecked\\n"); }\n'
                         % (fn, n, k, field))
                continue
            has_va = any(p["type"] == "va_list" for p in params)
            decl, names = self.arg_vars(params, "d")
            if has_va:
                o.append("static void %s_va(int dummy, ...)\n{\n    va_list dat2t_ap;\n" % fn)
            else:
                o.append("static void %s(void)\n{\n" % fn)
            o.append("\n".join(decl) + "\n")
            if has_va:
                o.append("    va_start(dat2t_ap, dummy);\n")
            o.append('    printf("fmacro %s/%d\\n");\n' % (n, k))
            o.append("    DAT_RETURN r = %s(%s);\n" % (n, ", ".join(names)))
            o.append('    printf("  -> 0x%x\\n", (unsigned)r);\n')
            if has_va:
                o.append("    va_end(dat2t_ap);\n}\n")
                o.append("static void %s(void) { %s_va(0, 0x5a5a5a5a12345678ULL); }\n\n" % (fn, fn))
            else:
                o.append("}\n\n")
        o.append("static void dat2t_dispatch(void)\n{\n    dat2t_h2p();\n    dat2t_fill();\n")
        for fn in calls:
            o.append("    %s();\n" % fn)
        o.append("}\n\n")
        return "".join(o)

    def ext_macros(self):
        o = ["static void dat2t_ext(void)\n{\n"]
        for n, m in self.macros.items():
            if m["params"] is None or self.fn_family(n) != "ext":
                continue
            k = len(m["params"])
            args = ", ".join("((DAT_UINT64)0x%x)" % (0x1001 + i) for i in range(k))
            o.append('    printf("fmacro %s/%d\\n");\n' % (n, k))
            o.append('    printf("  -> 0x%%x\\n", (unsigned)%s(%s));\n' % (n, args))
        o.append("}\n\n")
        return "".join(o)

    def other_fmacros(self):
        o = ["static void dat2t_fmacros(void)\n{\n"]
        for n, m in self.macros.items():
            if m["params"] is None:
                continue
            fam = self.fn_family(n)
            if fam == "deviation":
                o.append(self.deviation(n))
        o.append("}\n\n")
        return "".join(o)


def cmd_gen(args):
    ref = build(args.cc, args.ref, args.work, "ref")
    ours = build(args.cc, args.ours, args.work, "ours")
    g = Gen(ref, ours, args.cc, args.work)
    g.ref_root, g.ours_root = args.ref, args.ours
    g.classify_macros()
    text = g.generate()
    with open(args.out, "w") as f:
        f.write(text)
    return 0


def cmd_copied(args):
    """Long comment lines of the reference headers must not appear in ours."""
    def comment_lines(path):
        text = open(path, encoding="latin-1").read()
        out = set()
        for c in re.findall(r"/\*.*?\*/|//[^\n]*", text, re.S):
            for line in c.split("\n"):
                s = re.sub(r"[\s/*]+", " ", line).strip()
                # prose only: names alone are shared by necessity
                if len(s) >= 24 and len(s.split()) >= 4:
                    out.add(s)
        return out
    ref = set()
    for n in sorted(os.listdir(args.ref_dir)):
        if n.endswith(".h"):
            ref |= comment_lines(os.path.join(args.ref_dir, n))
    bad = 0
    for n in sorted(os.listdir(args.ours_dir)):
        if not n.endswith(".h"):
            continue
        ours_text = re.sub(r"[\s/*]+", " ", open(os.path.join(args.ours_dir, n)).read())
        for s in sorted(ref):
            if s in ours_text:
                print("%s: reference comment text: %s" % (n, s))
                bad += 1
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["names", "gen", "copied"])
    ap.add_argument("--ref", default="/usr/include")
    ap.add_argument("--ours")
    ap.add_argument("--work")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("--out")
    ap.add_argument("--ref-dir")
    ap.add_argument("--ours-dir")
    args = ap.parse_args()
    if args.cmd == "names":
        return cmd_names(args)
    if args.cmd == "gen":
        return cmd_gen(args)
    return cmd_copied(args)


if __name__ == "__main__":
    sys.exit(main())
