#!/usr/bin/env python3
"""pkg-config for machines without one (the lent GPU machine): answers CMake's
FindPkgConfig queries from the .pc files that tests/gpu/pack_deps.sh wrote
(paths relative to ${pcfiledir}, so the packed folder works wherever it lies).

tests/gpu/run.sh puts a `pkg-config` wrapper calling this on PATH when the
machine has no pkg-config; the search path is PKG_CONFIG_PATH (colon list).

Handles what CMake asks: --version, --exists, --modversion, --variable=NAME,
--cflags, --cflags-only-I, --cflags-only-other, --libs, --libs-only-l,
--libs-only-L, --libs-only-other, --static, --print-errors, --short-errors,
--silence-errors; Requires / Requires.private are followed."""
import os
import re
import sys

VERSION = "0.29.2"


def find_pc(name):
    for d in os.environ.get("PKG_CONFIG_PATH", "").split(":"):
        if d and os.path.isfile(os.path.join(d, name + ".pc")):
            return os.path.join(d, name + ".pc")
    return None


def parse(path):
    vars_ = {"pcfiledir": os.path.dirname(os.path.abspath(path))}
    fields = {}

    def expand(v):
        for _ in range(16):
            n = re.sub(r"\$\{([A-Za-z0-9_.]+)\}", lambda m: vars_.get(m.group(1), ""), v)
            if n == v:
                break
            v = n
        return v

    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.match(r"^([A-Za-z0-9_.]+)\s*=\s*(.*)$", line)
            if m:
                vars_[m.group(1)] = expand(m.group(2).strip())
                continue
            m = re.match(r"^([A-Za-z0-9_.]+)\s*:\s*(.*)$", line)
            if m:
                fields[m.group(1)] = expand(m.group(2).strip())
    return vars_, fields


def requires(fields, static):
    out = []
    for key in ("Requires",) + (("Requires.private",) if static else ()):
        for item in re.split(r"[,\s]+", re.sub(r"[<>=!]+\s*[0-9][^,\s]*", "", fields.get(key, ""))):
            if item:
                out.append(item)
    return out


def collect(names, static, seen=None):
    seen = [] if seen is None else seen
    for n in names:
        if n in [s[0] for s in seen]:
            continue
        p = find_pc(n)
        if not p:
            raise KeyError(n)
        v, f = parse(p)
        seen.append((n, v, f))
        collect(requires(f, static), static, seen)
    return seen


def main(argv):
    flags, names = [], []
    for a in argv:
        if a.startswith("--"):
            flags.append(a)
        else:
            # "name >= 1.0" arrives as one argument; keep the name
            names.extend(x for x in re.split(r"\s+", a.strip()) if x and not re.match(r"^[<>=!]|^[0-9]", x))
    if "--version" in flags:
        print(VERSION)
        return 0
    static = "--static" in flags
    quiet = "--silence-errors" in flags
    try:
        mods = collect(names, static)
    except KeyError as e:
        if not quiet:
            print(f"Package {e.args[0]} was not found in the pkg-config search path "
                  f"(PKG_CONFIG_PATH={os.environ.get('PKG_CONFIG_PATH', '')})", file=sys.stderr)
        return 1
    if not names:
        print("Must specify package names on the command line", file=sys.stderr)
        return 1
    out = []
    for fl in flags:
        if fl == "--modversion":
            for _, _, f in mods[: len(names)]:
                print(f.get("Version", ""))
            return 0
        if fl.startswith("--variable="):
            name = fl.split("=", 1)[1]
            print(mods[0][1].get(name, ""))
            return 0
    cflags = " ".join(f.get("Cflags", "") for _, _, f in mods).split()
    libs = " ".join(f.get("Libs", "") + (" " + f.get("Libs.private", "") if static else "")
                    for _, _, f in mods).split()
    for fl in flags:
        if fl == "--cflags":
            out += cflags
        elif fl == "--cflags-only-I":
            out += [x for x in cflags if x.startswith("-I")]
        elif fl == "--cflags-only-other":
            out += [x for x in cflags if not x.startswith("-I")]
        elif fl == "--libs":
            out += libs
        elif fl == "--libs-only-l":
            out += [x for x in libs if x.startswith("-l")]
        elif fl == "--libs-only-L":
            out += [x for x in libs if x.startswith("-L")]
        elif fl == "--libs-only-other":
            out += [x for x in libs if not x.startswith(("-l", "-L"))]
    seen, uniq = set(), []
    for x in out:
        if x not in seen:
            seen.add(x)
            uniq.append(x)
    if any(fl.startswith(("--cflags", "--libs")) for fl in flags):
        print(" ".join(uniq))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
