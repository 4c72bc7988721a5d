"""tiktoken's API on mkshards: its own test suite (the tiktoken 0.14.0 sdist's tests/) run against mkshards through
a shim module named tiktoken, and the parts of the API that suite leaves to the network (p50k names, model tables),
checked here against tiktoken itself where it is installed."""
import json
import os
import random
import subprocess
import sys
import tarfile

import pytest

import mkshards

from conftest import VOCAB

TIKTOKEN_VERSION = "0.14.0"
# tiktoken itself fails these offline: each loads p50k_base / p50k_edit, whose rank file is downloaded (not in
# ../shared/vocab). They run when $MKS_VOCAB_DIR or the cache holds p50k_base.tiktoken.
NEEDS_P50K = ["tests/test_encoding.py::test_simple", "tests/test_encoding.py::test_basic_encode",
              "tests/test_misc.py::test_encoding_for_model", "tests/test_simple_public.py::test_simple",
              "tests/test_simple_public.py::test_encoding_for_model"]
SHIM = ("# the shim: tiktoken's test suite sees mkshards under tiktoken's name\n"
        "from mkshards import Encoding, encoding_for_model, encoding_name_for_model, get_encoding, "
        "list_encoding_names\n")


@pytest.fixture(scope="session")
def tiktoken_suite(tmp_path_factory):
    """tiktoken's tests/ from its sdist (pip download, cached under $MKS_PY_CACHE or the build folder); skipped when
    the package index cannot be reached (hypothesis is the suite's own requirement)."""
    pytest.importorskip("hypothesis", reason="hypothesis not installed (tiktoken's tests need it)")
    cache = os.environ.get("MKS_PY_CACHE") or str(tmp_path_factory.getbasetemp().parent / "tiktoken-sdist")
    os.makedirs(cache, exist_ok=True)
    sdist = os.path.join(cache, f"tiktoken-{TIKTOKEN_VERSION}.tar.gz")
    if not os.path.isfile(sdist):
        p = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                            f"tiktoken=={TIKTOKEN_VERSION}", "--no-binary", ":all:", "--no-deps", "-d", cache],
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0 or not os.path.isfile(sdist):
            pytest.skip(f"cannot fetch the tiktoken {TIKTOKEN_VERSION} sdist (no package index?): "
                        f"{p.stderr.strip()[-300:]}")
    d = tmp_path_factory.mktemp("tiktoken_suite")
    with tarfile.open(sdist) as tf:
        members = [m for m in tf.getmembers()
                   if m.name.startswith(f"tiktoken-{TIKTOKEN_VERSION}/tests/") and m.isfile()]
        assert members, "the sdist has no tests/"
        for m in members:
            m.name = m.name.split("/", 1)[1]
            tf.extract(m, d)
    (d / "shim" / "tiktoken").mkdir(parents=True)
    (d / "shim" / "tiktoken" / "__init__.py").write_text(SHIM)
    return d


def _p50k_present():
    try:
        mkshards.get_encoding("p50k_base")
        return True
    except mkshards.MkshardsError:
        return False


def test_tiktoken_own_suite(shared, tiktoken_suite, tiktoken_cache):
    """Every test of tiktoken's suite that tiktoken passes offline passes on mkshards (all 33 with p50k_base)."""
    env = dict(os.environ, PYTHONPATH=str(tiktoken_suite / "shim"), TIKTOKEN_CACHE_DIR=tiktoken_cache)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    if not _p50k_present():
        args += [a for t in NEEDS_P50K for a in ("--deselect", t)]
    p = subprocess.run(args, cwd=tiktoken_suite, env=env, capture_output=True, text=True, timeout=600)
    tail = p.stdout[-3000:] + p.stderr[-2000:]
    assert p.returncode == 0, tail
    # the suite really ran against mkshards, not an installed tiktoken
    probe = subprocess.run([sys.executable, "-c", "import tiktoken, mkshards; "
                            "assert tiktoken.Encoding is mkshards.Encoding"], env=env, cwd=tiktoken_suite)
    assert probe.returncode == 0


def test_model_tables():
    assert mkshards.encoding_name_for_model("gpt-4o-2024-05-13") == "o200k_base"
    assert mkshards.encoding_name_for_model("gpt-oss-120b") == "o200k_harmony"
    assert mkshards.encoding_name_for_model("text-davinci-edit-001") == "p50k_edit"
    assert mkshards.encoding_name_for_model("gpt-3.5-turbo-0301") == "cl100k_base"
    with pytest.raises(KeyError):
        mkshards.encoding_name_for_model("no-such-model")
    assert mkshards.encoding_for_model("gpt2").name == "gpt2"
    assert set(mkshards.list_encoding_names()) == {"gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base",
                                                  "o200k_base", "o200k_harmony"}


def test_model_tables_equal_tiktoken(tiktoken_mod):
    from tiktoken import model
    assert model.MODEL_TO_ENCODING == mkshards._encoding.MODEL_TO_ENCODING
    assert model.MODEL_PREFIX_TO_ENCODING == mkshards._encoding.MODEL_PREFIX_TO_ENCODING


def test_id_errors_are_tiktoken_classes(shared):
    """tiktoken: an unknown id is a KeyError, a negative or > 32-bit one an OverflowError, a non-str a TypeError;
    each stays a MkshardsError too."""
    enc = mkshards.get_encoding("cl100k_base")
    for ids in ([100261], [1, 100256], [2**32 - 1], [10**6]):
        with pytest.raises(KeyError) as ei:
            enc.decode(ids)
        assert isinstance(ei.value, mkshards.MkshardsError)
    for ids in ([-1], [2**32], [1, -(2**70)]):
        with pytest.raises(OverflowError) as ei:
            enc.decode_bytes(ids)
        assert isinstance(ei.value, mkshards.MkshardsError)
    with pytest.raises(KeyError):
        enc.decode_single_token_bytes(100261)
    with pytest.raises(OverflowError):
        enc.decode_single_token_bytes(-1)
    for bad in (None, b"bytes", 3):
        with pytest.raises(TypeError):
            enc.encode(bad)
        with pytest.raises(TypeError):
            enc.encode_ordinary(bad)


def test_harmony_and_many_specials(shared):
    """o200k_harmony: o200k_base's ranks and tiktoken's 1,090 special tokens; every one is matched in encode
    (the encoder once took only the first 64 specials in force)."""
    h = mkshards.get_encoding("o200k_harmony")
    assert h.n_vocab == 201088 and h.encode_ordinary("hello world") == mkshards.get_encoding("o200k_base").encode(
        "hello world")
    assert h.encode("<|start|>user<|message|>hi<|end|> <|reserved_201087|>", allowed_special="all") == \
        [200006, 1428, 200008, 3686, 200007, 220, 201087]
    assert h.encode("x<|reserved_200500|>", allowed_special={"<|reserved_200500|>"}) == [87, 200500]
    # a custom encoding with 300 specials: the last one is found too
    base = mkshards.get_encoding("gpt2")
    sp = {f"<|s{i}|>": 50257 + i for i in range(300)}
    enc = mkshards.Encoding(name="many", pat_str=base.pat_str, mergeable_ranks=base._mergeable_ranks,
                            special_tokens=sp)
    assert enc.encode("a<|s299|>b<|s0|>", allowed_special="all") == [64, 50556, 65, 50257]
    assert enc.encode("<|s299|>", disallowed_special=()) == base.encode_ordinary("<|s299|>")


def test_encode_bytes(shared):
    enc = mkshards.get_encoding("cl100k_base")
    assert enc._encode_bytes(b" \xec\x8b\xa4\xed") == [62085]
    rnd = random.Random(5)
    for _ in range(500):
        b = bytes(rnd.choice((rnd.randrange(256), 0x20, 0x0A, 0xE4, 0x80)) for _ in range(rnd.randrange(30)))
        assert enc.decode_bytes(enc._encode_bytes(b)) == b
    assert enc._encode_bytes("héllo".encode()) == enc.encode_ordinary("héllo")


def test_encode_bytes_equal_tiktoken(shared, tiktoken_mod):
    rnd = random.Random(7)
    for name in ("r50k_base", "cl100k_base", "o200k_base"):
        m, t = mkshards.get_encoding(name), tiktoken_mod.get_encoding(name)
        for i in range(1500):
            b = bytes(rnd.choice((rnd.randrange(256), 32, 10, 9, 0xE4, 0x80, 97)) for _ in range(rnd.randrange(24)))
            if i % 3 == 0:
                b = rnd.choice(("hello world ", " \n\n ", "日本語 ", "xxxxx")).encode() + b
            assert m._encode_bytes(b) == t._encode_bytes(b), (name, b)


def test_constructor_like_tiktoken(shared, tiktoken_mod):
    """Encoding(name=, pat_str=, mergeable_ranks=, special_tokens=, explicit_n_vocab=): Llama 3's reference code
    builds its encoder this way (cl100k-form pattern, 256 reserved specials after the ranks)."""
    import pickle
    t = tiktoken_mod.get_encoding("cl100k_base")
    llama_pat = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    n = len(t._mergeable_ranks)
    specials = {f"<|reserved_special_token_{i}|>": n + i for i in range(256)}
    kw = dict(name="llama_like", pat_str=llama_pat, mergeable_ranks=t._mergeable_ranks, special_tokens=specials,
              explicit_n_vocab=n + 256)
    m, r = mkshards.Encoding(**kw), tiktoken_mod.Encoding(**kw)
    text = "Hello <|reserved_special_token_255|> world's 12345 \n\n  x<|reserved_special_token_7|>"
    assert m.encode(text, allowed_special="all") == r.encode(text, allowed_special="all")
    assert m.encode_ordinary(text) == r.encode_ordinary(text)
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.encode(text, allowed_special="all") == m.encode(text, allowed_special="all") and m2.name == "llama_like"
    with pytest.raises(ValueError, match="explicit_n_vocab"):
        mkshards.Encoding(**dict(kw, explicit_n_vocab=n + 255))
    with pytest.raises(ValueError, match="ranks"):
        mkshards.Encoding(name="gap", pat_str=llama_pat, mergeable_ranks={b"a": 0, b"b": 2}, special_tokens={})


QWEN_PAT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
PAT_TEXTS = ["Hello world's 12345 \n\n  x<|endoftext|>y", "IT'S Café cafe\u0301 ½ ²³ ①", "end  ", "a.\nb$c",
             "日本語のテキスト 한국어 Русский", "    def f(x):\n        return x**2\n\n\n", "🇫🇷👍🏽 ok", ""]


def test_constructor_any_pat_str(shared, tiktoken_mod):
    """Encoding(pat_str=...) takes any regex, as tiktoken does (Qwen v1's reference code builds its encoder with
    its own PAT_STR): the built-in spellings run the built-in scanners, any other through the general regex
    engine with tiktoken's meaning; ids equal tiktoken's."""
    import pickle
    t = tiktoken_mod.get_encoding("cl100k_base")
    for pat in (QWEN_PAT, r"\w+|\s+", r"\w+$|\w|\s+", r"""\p{L}++|\p{N}{1,2}+| ?[^\s\p{L}\p{N}]++|\s++$|\s+"""):
        kw = dict(name="custom", pat_str=pat, mergeable_ranks=t._mergeable_ranks,
                  special_tokens={"<|endoftext|>": 100257})
        m, r = mkshards.Encoding(**kw), tiktoken_mod.Encoding(**kw)
        assert m.pat_str == pat and m._pat_str == pat
        for text in PAT_TEXTS:
            assert m.encode_ordinary(text) == r.encode_ordinary(text), (pat, text)
            assert m.encode(text, allowed_special="all") == r.encode(text, allowed_special="all"), (pat, text)
        m2 = pickle.loads(pickle.dumps(m))
        assert m2.encode_ordinary(PAT_TEXTS[0]) == m.encode_ordinary(PAT_TEXTS[0]) and m2.pat_str == pat
    with pytest.raises(ValueError, match=r"\\b"):  # a construct whose meaning is not proven equal: named
        mkshards.Encoding(name="b", pat_str=r"\bx\b|.", mergeable_ranks=t._mergeable_ranks, special_tokens={})
    with pytest.raises(TypeError, match="pat_str"):
        mkshards.Encoding(name="n", pat_str=None, mergeable_ranks=t._mergeable_ranks, special_tokens={})


def test_builtin_pat_str_runs_the_builtin(tiktoken_mod, monkeypatch):
    """tiktoken's own pat_str of every encoding it ships, the original GPT-2 and Llama 3 forms and the C library's
    spellings run the built-in scanner: Encoding hands pat_str to the C library, whose table of spellings
    (tokenizer/pattern.c) is the only one; any other regex runs as itself (the general engine)."""
    import tiktoken_ext.openai_public as pub
    monkeypatch.setattr(pub, "load_tiktoken_bpe", lambda *a, **k: {})  # the patterns only: no rank files
    monkeypatch.setattr(pub, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: {})
    want = {"gpt2": "gpt2", "r50k_base": "gpt2", "p50k_base": "gpt2", "p50k_edit": "gpt2",
            "cl100k_base": "cl100k", "o200k_base": "o200k", "o200k_harmony": "o200k"}
    ranks = {bytes([i]): i for i in range(256)}

    def core(pat):
        return mkshards.Encoding(name="p", pat_str=pat, mergeable_ranks=ranks, special_tokens={})._core

    builtin = {b: core(b).pat_str for b in ("gpt2", "cl100k", "o200k")}  # a name: the built-in's own regex
    forms = [(pub.ENCODING_CONSTRUCTORS[n]()["pat_str"], b) for n, b in want.items()]
    forms += [(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""", "gpt2"),
              (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
               r"""\s*[\r\n]+|\s+(?!\S)|\s+""", "cl100k")]
    forms += [(pat, b) for b, pat in builtin.items()]
    for pat, b in forms:
        c = core(pat)
        assert (c.pattern, c.pat_str) == (b, builtin[b]), pat
    assert core(QWEN_PAT).pat_str == QWEN_PAT  # not a built-in's spelling: the regex itself runs


def test_rank_file_pattern_and_normalize(shared, tiktoken_mod):
    """Encoding.from_file(rank file, pattern=REGEX, normalize="nfc") = Qwen v1's tokenizer: tiktoken with its
    PAT_STR on unicodedata.normalize("NFC", text); the fingerprint tells it from the file's own."""
    import unicodedata
    path = os.path.join(VOCAB, "cl100k_base.tiktoken")
    m = mkshards.Encoding.from_file(path, pattern=QWEN_PAT, normalize="nfc")
    t = tiktoken_mod.get_encoding("cl100k_base")
    r = tiktoken_mod.Encoding(name="q", pat_str=QWEN_PAT, mergeable_ranks=t._mergeable_ranks,
                              special_tokens=t._special_tokens)
    for text in PAT_TEXTS:
        nfc = unicodedata.normalize("NFC", text)
        assert m.encode_ordinary(text) == r.encode_ordinary(nfc), text
    assert m.pat_str == QWEN_PAT
    plain = mkshards.Encoding.from_file(path)
    assert plain.fingerprint != m.fingerprint
    assert mkshards.Encoding.from_file(path, pattern=QWEN_PAT).fingerprint not in (plain.fingerprint, m.fingerprint)
    with pytest.raises(ValueError, match="normalize"):
        mkshards.Encoding.from_file(path, normalize="nfd")
    with pytest.raises(ValueError, match="pattern"):
        mkshards.Encoding.from_file(path, pattern="cl100")


def test_p50k_names_refuse_a_wrong_file(tmp_path, monkeypatch):
    """p50k_base resolves in $MKS_VOCAB_DIR like the other names, checked against tiktoken's sha256."""
    (tmp_path / "p50k_base.tiktoken").write_bytes(open(os.path.join(VOCAB, "gpt2.tiktoken"), "rb").read())
    monkeypatch.setenv("MKS_VOCAB_DIR", str(tmp_path))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "none"))
    mkshards._encoding._cache.pop("p50k_base", None)
    with pytest.raises(mkshards.MkshardsError, match="sha256"):
        mkshards.get_encoding("p50k_base")
    (tmp_path / "p50k_base.tiktoken").unlink()
    with pytest.raises(mkshards.MkshardsError, match="p50k_base.tiktoken not found"):
        mkshards.get_encoding("p50k_edit")


def test_add_special_tokens_like_hf(shared, tmp_path):
    """Encoding.encode on a tokenizer.json applies its post_processor by default, as HF's Tokenizer.encode
    (Llama 3's own file: ByteLevel + TemplateProcessing, <|begin_of_text|> first; the shared copy has none, so
    nothing); add_special_tokens=False, encode_ordinary and encode_batch never add them."""
    src = os.path.join(VOCAB, "hf", "llama3", "tokenizer.json")
    j = json.load(open(src, encoding="utf-8"))
    bot = {"id": "<|begin_of_text|>", "type_id": 0}
    j["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": bot}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": bot}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": dict(bot, type_id=1)},
                  {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                                  "tokens": ["<|begin_of_text|>"]}}}]}
    framed = tmp_path / "tokenizer.json"
    framed.write_text(json.dumps(j), encoding="utf-8")
    llama = mkshards.Encoding.from_file(framed)
    text = "Hello world, 12345!"
    plain = llama.encode_ordinary(text)
    assert llama.encode(text) == [128000] + plain
    assert llama.encode(text, add_special_tokens=False) == plain
    assert llama.encode_batch([text]) == [plain]
    bare = mkshards.Encoding.from_file(src)  # post_processor null
    assert bare.encode(text) == bare.encode_ordinary(text) == plain
    cl = mkshards.get_encoding("cl100k_base")
    assert cl.encode(text) == cl.encode_ordinary(text)
    try:
        import tokenizers
    except ImportError:
        return
    for path, enc in ((str(framed), llama), (src, bare)):
        hf = tokenizers.Tokenizer.from_file(path)
        for t in (text, "", "  spaces\n\nand \U0001f642 emoji"):
            assert enc.encode(t) == hf.encode(t).ids, (path, t)
            assert enc.encode(t, add_special_tokens=False) == hf.encode(t, add_special_tokens=False).ids
