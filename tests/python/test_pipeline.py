"""mkshards.lint / mkshards.hist: the same dicts as `mkshards lint|hist --json`."""
import json
import os

import pytest

import mkshards
from conftest import DATA, SAMPLES, run_cli


def cli_json(mkshards_bin, *args):
    p = run_cli(mkshards_bin, *args, "--json", check=False)
    assert p.returncode in (0, 1, 2), p.stderr
    return json.loads(p.stdout), p.returncode


def test_lint_equals_cli(shared, mkshards_bin):
    bad = os.path.join(DATA, "bad")
    want, code = cli_json(mkshards_bin, "lint", "-t", "cl100k_base", "-L", "256", "-j", "2", bad)
    got = mkshards.lint([bad], tokenizer="cl100k_base", seq_len=256, threads=2)
    assert got == want
    assert mkshards.lint_exit_code(got) == code == 2
    want, code = cli_json(mkshards_bin, "lint", "--max-examples", "1", os.path.join(DATA, "clean"))
    got = mkshards.lint(os.path.join(DATA, "clean"), max_examples=1)
    assert got == want and mkshards.lint_exit_code(got) == code
    both, _ = cli_json(mkshards_bin, "lint", "--hist", "-t", "gpt2", "-L", "128", SAMPLES)
    enc = mkshards.get_encoding("gpt2")
    assert mkshards.lint([SAMPLES], tokenizer=enc, seq_len=128, hist=True) == both


def test_hist_equals_cli(shared, mkshards_bin, tmp_path):
    inputs = [os.path.join(SAMPLES, "tiny.jsonl"), os.path.join(SAMPLES, "notes.txt")]
    want, _ = cli_json(mkshards_bin, "hist", "-t", "o200k_base", "-L", "64", "--doc-sep", "blank-line", *inputs)
    seen = []
    got = mkshards.hist(inputs, tokenizer="o200k_base", seq_len=64, doc_sep="blank-line", svg=tmp_path / "h.svg",
                        progress=seen.append)
    assert got == want
    assert (tmp_path / "h.svg").read_text().startswith("<svg") or "<svg" in (tmp_path / "h.svg").read_text()
    assert seen[0]["stage"] == "start" and seen[-1]["stage"] == "done"


def test_lint_hist_progress_and_cancel(shared, tmp_path):
    """Progress after every batch; a true return, an exception from the callback or Ctrl-C cancel (no svg
    written), and the next call runs to the end."""
    import signal
    ins = [os.path.join(shared, "corpus", "web.jsonl.zst"), os.path.join(shared, "corpus", "code.jsonl.zst")]
    ev = []
    rep = mkshards.lint(ins, threads=2, progress=ev.append)
    steps = [e for e in ev if e["stage"] == "progress"]
    assert ev[0]["stage"] == "start" and ev[-1]["stage"] == "done" and len(steps) >= 3
    assert steps[-1]["last"] and not steps[0]["last"] and steps[-1]["records"] == rep["records"]
    assert all(a["bytes_in"] < b["bytes_in"] and a["seconds"] <= b["seconds"] for a, b in zip(steps, steps[1:]))
    svg = tmp_path / "h.svg"
    seen = []

    def stop_at_two(e):
        seen.append(e)
        return len(seen) == 3  # start + two batches
    with pytest.raises(mkshards.MkshardsError, match="cancel") as ei:
        mkshards.hist(ins, tokenizer="gpt2", svg=svg, progress=stop_at_two)
    assert ei.value.code == -10 and len(seen) == 3 and not svg.exists()

    def boom(e):
        if e["stage"] == "progress":
            raise RuntimeError("from the callback")
    with pytest.raises(RuntimeError, match="from the callback"):
        mkshards.hist(ins, tokenizer="gpt2", svg=svg, progress=boom)
    assert not svg.exists()

    def interrupt(e):
        if e["stage"] == "progress":
            os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        mkshards.lint(ins, tokenizer="gpt2", hist=True, progress=interrupt)
    got = mkshards.hist(ins, tokenizer="gpt2", svg=svg)
    assert svg.exists() and got["docs"] > 0


def test_pipeline_errors(shared, tmp_path):
    with pytest.raises(mkshards.MkshardsError, match="nothere"):
        mkshards.lint([str(tmp_path / "nothere.jsonl")])
    with pytest.raises(ValueError):
        mkshards.hist([SAMPLES], tokenizer=None)
    with pytest.raises(ValueError):
        mkshards.lint([SAMPLES], doc_sep="para")


def test_enum_names_from_the_library(shared, tmp_path):
    """pack / over_long / doc_sep are parsed by the C library's name tables (ds_pack_parse, ...), as the CLI's
    --pack / --over-long / --doc-sep: the message lists the library's names, and "blank" (the CLI's short
    spelling of blank-line) is taken too."""
    ins = [os.path.join(SAMPLES, "tiny.jsonl")]
    from mkshards import _core
    assert (_core.PACK_NAMES, _core.OVER_LONG_NAMES) == (("concat", "bfd", "none"),
                                                         ("truncate", "chunk", "drop", "drop-turns"))
    assert (_core.DOC_SEP_NAMES, _core.SPLIT_NAMES) == (("file", "line", "blank-line"), ("train", "val"))
    for arg, names in (("pack", "concat, bfd or none"), ("over_long", "truncate, chunk, drop or drop-turns"),
                       ("doc_sep", "file, line or blank-line")):
        with pytest.raises(ValueError, match=f"{arg} 'bogus': must be {names}"):
            mkshards.build(ins, tmp_path / "x", tokenizer="gpt2", seq_len=64, **{arg: "bogus"})
        with pytest.raises(TypeError, match=f"{arg}: a str"):
            mkshards.build(ins, tmp_path / "x", tokenizer="gpt2", seq_len=64, **{arg: 1})
    with pytest.raises(ValueError, match="doc_sep 'para': must be file, line or blank-line"):
        mkshards.lint([SAMPLES], doc_sep="para")
    assert mkshards.lint(ins, doc_sep="blank") == mkshards.lint(ins, doc_sep="blank-line")
    res = mkshards.build(ins, tmp_path / "none", tokenizer="gpt2", seq_len=64, pack="none", over_long="chunk")
    assert (res["manifest"]["config"]["pack"], res["manifest"]["config"]["over_long"]) == ("none", "chunk")


def _tree(d):
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, d)] = open(p, "rb").read()
    return out


def test_build_byte_identical_to_cli(shared, mkshards_bin, tmp_path):
    ins = [os.path.join(DATA, "clean"), os.path.join(SAMPLES, "tiny.jsonl"), os.path.join(DATA, "bad")]
    opts = ["-L", "96", "--pack", "bfd", "--val-fraction", "0.25", "--shard-tokens", "4K", "--seed", "7"]
    run_cli(mkshards_bin, "build", "-q", "-t", "gpt2", *opts, "-o", str(tmp_path / "cli"), *ins)
    events = []
    res = mkshards.build(ins, tmp_path / "py", tokenizer="gpt2", seq_len=96, pack="bfd", val_fraction=0.25,
                         shard_tokens=4096, seed=7, progress=events.append)
    assert _tree(tmp_path / "cli") == _tree(tmp_path / "py")
    assert res["manifest"] == json.load(open(tmp_path / "cli" / "manifest.json"))
    assert res["n_shards"] == len(res["manifest"]["shards"]) and not res["up_to_date"]
    assert events and events[-1]["event"] == "progress" and events[-1]["last"]
    assert mkshards.build(ins, tmp_path / "py", tokenizer="gpt2", seq_len=96, pack="bfd", val_fraction=0.25,
                          shard_tokens=4096, seed=7)["up_to_date"]
    run_cli(mkshards_bin, "build", "-q", "-t", "cl100k_base", "-L", "64", "--zstd", "3", "--no-shuffle", "-o",
            str(tmp_path / "cli2"), *ins)
    mkshards.build(ins, tmp_path / "py2", tokenizer=mkshards.get_encoding("cl100k_base"), seq_len=64, zstd=3,
                   shuffle=False, threads=1)
    py2 = _tree(tmp_path / "py2")
    cli2 = _tree(tmp_path / "cli2")
    # the Encoding's spec is the name it was loaded by, as -t cl100k_base records it
    assert py2 == cli2


def test_build_cancel_and_ctrl_c_then_resume(shared, mkshards_bin, tmp_path):
    import signal
    ins = [os.path.join(shared, "corpus", "web.jsonl.zst")]
    kw = dict(tokenizer="gpt2", seq_len=256, batch_bytes=256 << 10, shard_tokens=64 << 10, threads=2,
              checkpoint_seconds=0)
    run_cli(mkshards_bin, "build", "-q", "-t", "gpt2", "-L", "256", "--batch-bytes", str(256 << 10),
            "--shard-tokens", str(64 << 10), "-o", str(tmp_path / "cli"), *ins)
    seen = []

    def stop_after_two(ev):
        seen.append(ev)
        return len(seen) >= 3
    with pytest.raises(mkshards.MkshardsError) as ei:
        mkshards.build(ins, tmp_path / "py", progress=stop_after_two, **kw)
    assert "cancel" in str(ei.value)
    assert not os.path.exists(tmp_path / "py" / "manifest.json")

    def interrupt(ev):
        if len(seen) == 6:
            os.kill(os.getpid(), signal.SIGINT)
        seen.append(ev)
    with pytest.raises(KeyboardInterrupt):
        mkshards.build(ins, tmp_path / "py", progress=interrupt, **kw)
    assert not os.path.exists(tmp_path / "py" / "manifest.json")
    assert any(ev["event"] == "resume" for ev in seen[3:])  # the second call continued from the first's checkpoint
    res = mkshards.build(ins, tmp_path / "py", **kw)
    assert res["resumed"]
    assert _tree(tmp_path / "cli") == _tree(tmp_path / "py")

    def boom(ev):
        raise RuntimeError("from the callback")
    with pytest.raises(RuntimeError, match="from the callback"):
        mkshards.build(ins, tmp_path / "py3", progress=boom, **kw)
    with pytest.raises(mkshards.MkshardsError):
        mkshards.build(ins, ins[0], **kw)  # an output over an input is refused
