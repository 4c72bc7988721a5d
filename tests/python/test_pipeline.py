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


def test_pipeline_errors(shared, tmp_path):
    with pytest.raises(mkshards.MkshardsError, match="nothere"):
        mkshards.lint([str(tmp_path / "nothere.jsonl")])
    with pytest.raises(ValueError):
        mkshards.hist([SAMPLES], tokenizer=None)
    with pytest.raises(ValueError):
        mkshards.lint([SAMPLES], doc_sep="para")
