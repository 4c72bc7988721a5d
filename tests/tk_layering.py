#!/usr/bin/env python3
"""tk_layering: no call circle between the files of a library (issue 26
items 1-2: a loader calls its engine, the engine never names the loader; the
generic API reaches engines only through the dispatcher), and no library
calling up into one above it.

    tk_layering.py NM LIB.a [LIB.a ...]

Reads the libraries' objects with nm: file A -> file B when A's object uses
a symbol (function or table) that B's object defines. Every strongly
connected set of two or more files is a circle. With several libraries,
lowest first (e.g. libtk.a libds.a libtr_plan.a libtr.a), the graph is their
union, and a file of one library using a symbol that only a later one
defines is a call up. KNOWN lists the circles that were there when this
test was written and belong to other work; the test fails on any other
circle, and also when a KNOWN one whose files are all in the libraries given
is gone (so the list shrinks with the code). It first checks its own
detector on planted graphs. ctest tk_layering runs it on libtk.a,
lib_layering on libds.a + libtr_plan.a + libtr.a."""
import subprocess
import sys

# Circles left for their own files' work, with the symbols (none left.
# tokenizer/: spm<->unigram went with load_spm.c, load_tiktoken/tk_engine/
# tk_image with tk_image.c reading the tokenizer's engine pointer; dataset/:
# shard<->verify went with ds_shardset_open moving to verify.c, chat<->
# chat_template with ds_chat_fit moving to chat_fit.c; train/: family ->
# family_gpt2 -> model_config -> family went with the tr_model_* dispatch
# moving from model_config.c into family.c):
KNOWN = []


def graph(nm, libs):
    """(edges, files, ups): file -> files it uses; library index -> its files;
    the calls up (file, library index, symbols only later libraries define).
    A file compiled into two libraries (family_llama.c into tr_plan without
    its instance ops, into tr with them) is one node of the graph, and each
    copy is checked for calls up from its own library."""
    copies = []  # (file, library index, symbols defined, symbols used)
    for k, lib in enumerate(libs):
        out = subprocess.run([nm, lib], capture_output=True, text=True, check=True).stdout
        cur = None
        for line in out.splitlines():
            if line.endswith(".o:"):
                name = line[:-3].rsplit("/", 1)[-1]
                for ext in (".c", ".cpp", ".cu"):
                    if name.endswith(ext):
                        name = name[: -len(ext)]
                cur = (name, k, set(), set())
                copies.append(cur)
                continue
            f = line.split()
            if cur is None or len(f) < 2:
                continue
            if len(f) == 3 and f[1] in "TDRBC":
                cur[2].add(f[2])
            elif len(f) == 2 and f[0] == "U":
                cur[3].add(f[1])
    owner, lowest = {}, {}
    for name, k, d, _ in copies:
        for sym in d:
            owner.setdefault(sym, name)
            lowest[sym] = min(lowest.get(sym, k), k)
    edges, files = {}, {}
    for name, k, _, u in copies:
        edges.setdefault(name, set()).update(owner[sym] for sym in u if sym in owner and owner[sym] != name)
        files.setdefault(k, set()).add(name)
    ups = [(name, k, sorted(sym for sym in u if lowest.get(sym, k) > k)) for name, k, _, u in copies]
    return edges, files, [x for x in ups if x[2]]


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
    libs = sys.argv[2:]
    edges, files, ups = graph(sys.argv[1], libs)
    bad = 0
    for k, lib in enumerate(libs):
        if not files.get(k):
            print("tk_layering: no objects read from", lib)
            bad = 1
    found = circles(edges)
    for c in found:
        if c not in KNOWN:
            why = {f: sorted(edges[f] & c) for f in sorted(c)}
            print("tk_layering: a call circle:", " ".join(sorted(c)), "- calls:", why)
            bad = 1
    for k in KNOWN:
        if k <= set(edges) and k not in found:
            print("tk_layering: the known circle", " ".join(sorted(k)), "is gone: take it out of KNOWN")
            bad = 1
    for f, k, syms in ups:
        print("tk_layering: %s (in %s) calls up into a later library: %s" % (f, libs[k], syms))
        bad = 1
    if not bad:
        known = sum(1 for k in KNOWN if k <= set(edges))
        print("tk_layering: %d files in %d libraries, no call up, no circle but the %d known ones"
              % (len(edges), len(libs), known))
    return bad


if __name__ == "__main__":
    sys.exit(main())
