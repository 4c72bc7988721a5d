"""mkshards.build / lint / hist on fine-tuning records (issue 28 item 3): format=, chat_template=, loss_on=,
messages_field= mean the CLI's --format / --chat-template / --loss-on / --messages-field. Checked against the CLI
on the same records (tests/data/chat/cli_qwen2.5.jsonl, the Qwen2 tokenizer of ../shared/vocab/hf): the same shard
bytes and manifest, the same lint and hist reports; the same refusals (ValueError where the CLI exits 64,
MkshardsError where it exits 2). Then the loss mask reaches the Python dataset (labels -100 off the mask)."""
import filecmp
import json
import os

import numpy as np
import pytest

import mkshards
from conftest import run_cli

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(HERE), "data", "chat")
CHAT = os.path.join(DATA, "cli_qwen2.5.jsonl")


@pytest.fixture(scope="module")
def qwen(shared):
    t = os.path.join(shared, "vocab", "hf", "qwen2", "tokenizer.json")
    if not os.path.isfile(t):
        pytest.skip(f"no {t}")
    return t


def same_tree(a, b):
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    for n in names:
        assert filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False), n


@pytest.mark.parametrize("opts", [
    {"format": "chat", "chat_template": "qwen2.5"},
    {"format": "auto", "chat_template": "qwen2.5", "loss_on": "all", "pack": "bfd"},
    {"format": "chat", "chat_template": "chatml", "over_long": "drop-turns", "pack": "none", "seq_len": 96},
])
def test_build_is_the_cli_build(mkshards_bin, qwen, tmp_path, opts):
    o = dict(opts)
    L = o.pop("seq_len", 256)
    args = ["build", "-t", qwen, "-L", str(L), "-q", "-j", "1", "--format", o["format"],
            "--chat-template", o["chat_template"]]
    for k in ("loss_on", "pack", "over_long"):
        if k in o:
            args += ["--" + k.replace("_", "-"), o[k]]
    run_cli(mkshards_bin, *args, "-o", str(tmp_path / "cli"), CHAT)
    res = mkshards.build(CHAT, tmp_path / "py", tokenizer=qwen, seq_len=L, threads=1, **o)
    same_tree(tmp_path / "cli", tmp_path / "py")
    assert not res["up_to_date"]
    ss = mkshards.ShardSet(str(tmp_path / "py"))
    assert ss.shard_version == 2 and 0 < ss.loss_tokens["train"] <= ss.tokens["train"]


def test_loss_mask_reaches_the_dataset(qwen, tmp_path):
    mkshards.build(CHAT, tmp_path / "s", tokenizer=qwen, seq_len=256, format="chat", chat_template="qwen2.5",
                   pack="none", threads=1)
    ss = mkshards.ShardSet(str(tmp_path / "s"))
    assert ss.shard_version == 2 and 0 < ss.loss_tokens["train"] < ss.tokens["train"]
    m = ss.read(np.arange(ss.rows["train"]), "train")["loss_mask"]
    assert int(m.sum()) == ss.loss_tokens["train"]


@pytest.mark.parametrize("report", ["lint", "hist"])
def test_lint_hist_are_the_cli_reports(mkshards_bin, qwen, report):
    p = run_cli(mkshards_bin, report, "-t", qwen, "-L", "64", "--json", "-j", "1", "--format", "chat",
                "--chat-template", "qwen2.5", CHAT, check=False)
    assert p.returncode in (0, 1, 2), p.stderr
    cli = json.loads(p.stdout)
    fn = mkshards.lint if report == "lint" else mkshards.hist
    py = fn(CHAT, tokenizer=qwen, seq_len=64, threads=1, format="chat", chat_template="qwen2.5")
    for d in (cli, py):  # run-dependent fields
        d.pop("seconds", None)
        d.pop("inputs", None)
    assert py == cli
    if report == "hist":
        assert json.dumps(py).count("loss") > 0  # conversation lengths and loss-token counts


def test_lint_without_tokenizer_checks_the_messages(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"messages": [{"role": "robot", "content": "x"}]}) + "\n")
    rep = mkshards.lint(str(f), format="chat")
    assert "chat-unknown-role" in json.dumps(rep)
    assert mkshards.lint_exit_code(rep) == 2
    assert "chat-unknown-role" not in json.dumps(mkshards.lint(str(f)))  # text: one field, no such rule


def test_refusals_are_the_cli_ones(qwen, tmp_path):
    with pytest.raises(ValueError, match="text, chat, prompt-completion or auto"):
        mkshards.build(CHAT, tmp_path / "a", tokenizer=qwen, seq_len=64, format="jsonl")
    with pytest.raises(ValueError, match="need format="):
        mkshards.build(CHAT, tmp_path / "b", tokenizer=qwen, seq_len=64, chat_template="qwen2.5")
    with pytest.raises(ValueError, match="need format="):
        mkshards.lint(CHAT, loss_on="assistant")
    with pytest.raises(ValueError, match="assistant, completion or all"):
        mkshards.hist(CHAT, tokenizer=qwen, format="chat", chat_template="qwen2.5", loss_on="default")
    with pytest.raises(ValueError, match="drop-turns"):
        mkshards.build(CHAT, tmp_path / "c", tokenizer=qwen, seq_len=64, over_long="drop-turns", pack="none")
    with pytest.raises(ValueError, match="chatml, qwen2"):  # an unknown name lists the built-ins (CLI: exit 64)
        mkshards.build(CHAT, tmp_path / "d", tokenizer=qwen, seq_len=64, format="chat", chat_template="nope")
    # auto: the tokenizer folder has no tokenizer_config.json (CLI: exit 2, listing the names)
    with pytest.raises(mkshards.MkshardsError, match="llama3"):
        mkshards.build(CHAT, tmp_path / "e", tokenizer=qwen, seq_len=64, format="chat", chat_template="auto")
    # a Python source takes chat records now (test_source.py: test_chat_records_from_python_sources)
    for d in "abcde":
        assert not (tmp_path / d).exists()
