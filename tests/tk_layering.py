#!/usr/bin/env python3
"""tk_layering: no call circle between the files of tokenizer/ (issue 26
item 1: a loader calls its engine, the engine never names the loader; the
generic API reaches engines only through the dispatcher).

    tk_layering.py NM LIBTK.a

Reads the library's objects with nm: file A -> file B when A's object uses a
symbol (function or table) that B's object defines. Every strongly connected
set of two or more files is a circle. KNOWN lists the circles that were
there when this test was written and belong to other work; the test fails on
any other circle, and also when a KNOWN one is gone (so the list shrinks with
the code). It first checks its own detector on planted graphs."""
import subprocess
import sys

# Circles left for their own files' work (issue 26 item 1), with the symbols
# (none left: spm<->unigram went with load_spm.c, load_tiktoken/tk_engine/tk_image
# with tk_image.c reading the tokenizer's engine pointer):
KNOWN = []


def graph(nm, lib):
    out = subprocess.run([nm, lib], capture_output=True, text=True, check=True).stdout
    defs, uses, cur = {}, {}, None
    for line in out.splitlines():
        if line.endswith(".o:"):
            cur = line[:-3].rsplit("/", 1)[-1]
            cur = cur[:-2] if cur.endswith(".c") else cur
            defs[cur], uses[cur] = set(), set()
            continue
        f = line.split()
        if cur is None or len(f) < 2:
            continue
        if len(f) == 3 and f[1] in "TDRBC":
            defs[cur].add(f[2])
        elif len(f) == 2 and f[0] == "U":
            uses[cur].add(f[1])
    owner = {s: f for f, ss in defs.items() for s in ss}
    return {f: {owner[s] for s in uses[f] if s in owner and owner[s] != f} for f in defs}


def circles(edges):
    """Strongly connected sets of 2+ nodes (Tarjan, iterative)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def selfcheck():
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert sorted(map(sorted, circles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}))) == [["a", "b"], ["c", "d"]]


def main():
    selfcheck()
    edges = graph(sys.argv[1], sys.argv[2])
    if not any(f.startswith("hf") for f in edges):
        print("tk_layering: no hf objects in", sys.argv[2])
        return 1
    found = circles(edges)
    bad = 0
    for c in found:
        if c not in KNOWN:
            why = {f: sorted(edges[f] & c) for f in sorted(c)}
            print("tk_layering: a call circle in tokenizer/:", " ".join(sorted(c)), "- calls:", why)
            bad = 1
    for k in KNOWN:
        if k not in found:
            print("tk_layering: the known circle", " ".join(sorted(k)), "is gone: take it out of KNOWN")
            bad = 1
    if not bad:
        print("tk_layering: %d files, no circle but the %d known ones" % (len(edges), len(KNOWN)))
    return bad


if __name__ == "__main__":
    sys.exit(main())
