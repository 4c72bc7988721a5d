"""tiktoken-compatible Encoding over the C tokenizer (tokenizer/tk.h)."""
import functools
import os
import threading

from . import _core

__all__ = ["Encoding", "get_encoding", "list_encoding_names", "encoding_for_model", "encoding_name_for_model"]

# Names tk_load resolves (in $MKS_VOCAB_DIR and tiktoken's cache).
_NAMES = ("gpt2", "r50k_base", "cl100k_base", "o200k_base")
# Names built here from a rank file and tiktoken's specials (tiktoken_ext/openai_public.py, tiktoken 0.14.0):
# name -> (rank files tried in $MKS_VOCAB_DIR, download URL (tiktoken's cache key), sha256 tiktoken expects,
# pattern, specials, explicit_n_vocab)
_BLOB = "https://openaipublic.blob.core.windows.net/encodings/"
_P50K_SHA = "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"
_O200K_SHA = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_HARMONY_SPECIALS = {
    "<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|reserved_200000|>": 200000, "<|reserved_200001|>": 200001,
    "<|return|>": 200002, "<|constrain|>": 200003, "<|reserved_200004|>": 200004, "<|channel|>": 200005,
    "<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008, "<|reserved_200009|>": 200009,
    "<|reserved_200010|>": 200010, "<|reserved_200011|>": 200011, "<|call|>": 200012,
    "<|endofprompt|>": 200018,
}
# tiktoken's table also names id 200018 <|reserved_200018|>, a second text of <|endofprompt|>'s id (its decode
# of 200018 then depends on hash order); the C library keeps one text per id, so that alias is left out.
_HARMONY_SPECIALS.update({f"<|reserved_{i}|>": i for i in range(200013, 201088) if i != 200018})
_DERIVED = {
    "p50k_base": ("p50k_base.tiktoken", _BLOB + "p50k_base.tiktoken", _P50K_SHA, "gpt2", {"<|endoftext|>": 50256},
                  50281),
    "p50k_edit": ("p50k_base.tiktoken", _BLOB + "p50k_base.tiktoken", _P50K_SHA, "gpt2",
                  {"<|endoftext|>": 50256, "<|fim_prefix|>": 50281, "<|fim_middle|>": 50282,
                   "<|fim_suffix|>": 50283}, None),
    "o200k_harmony": ("o200k_base.tiktoken", _BLOB + "o200k_base.tiktoken", _O200K_SHA, "o200k", _HARMONY_SPECIALS,
                      None),
}
_ALL_NAMES = ("gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony")

# tiktoken's model tables (tiktoken/model.py, tiktoken 0.14.0)
MODEL_PREFIX_TO_ENCODING = {
    "o1-": "o200k_base", "o3-": "o200k_base", "o4-mini-": "o200k_base",
    "gpt-5": "o200k_base", "gpt-4.5-": "o200k_base", "gpt-4.1-": "o200k_base", "chatgpt-4o-": "o200k_base",
    "gpt-4o-": "o200k_base", "gpt-4-": "cl100k_base", "gpt-3.5-turbo-": "cl100k_base", "gpt-35-turbo-": "cl100k_base",
    "gpt-oss-": "o200k_harmony",
    "ft:gpt-4o": "o200k_base", "ft:gpt-4": "cl100k_base", "ft:gpt-3.5-turbo": "cl100k_base",
    "ft:davinci-002": "cl100k_base", "ft:babbage-002": "cl100k_base",
}
MODEL_TO_ENCODING = {
    "o1": "o200k_base", "o3": "o200k_base", "o4-mini": "o200k_base",
    "gpt-5": "o200k_base", "gpt-4.1": "o200k_base", "gpt-4o": "o200k_base", "gpt-4": "cl100k_base",
    "gpt-3.5-turbo": "cl100k_base", "gpt-3.5": "cl100k_base", "gpt-35-turbo": "cl100k_base",
    "davinci-002": "cl100k_base", "babbage-002": "cl100k_base",
    "text-embedding-ada-002": "cl100k_base", "text-embedding-3-small": "cl100k_base",
    "text-embedding-3-large": "cl100k_base",
    "text-davinci-003": "p50k_base", "text-davinci-002": "p50k_base", "text-davinci-001": "r50k_base",
    "text-curie-001": "r50k_base", "text-babbage-001": "r50k_base", "text-ada-001": "r50k_base",
    "davinci": "r50k_base", "curie": "r50k_base", "babbage": "r50k_base", "ada": "r50k_base",
    "code-davinci-002": "p50k_base", "code-davinci-001": "p50k_base", "code-cushman-002": "p50k_base",
    "code-cushman-001": "p50k_base", "davinci-codex": "p50k_base", "cushman-codex": "p50k_base",
    "text-davinci-edit-001": "p50k_edit", "code-davinci-edit-001": "p50k_edit",
    "text-similarity-davinci-001": "r50k_base", "text-similarity-curie-001": "r50k_base",
    "text-similarity-babbage-001": "r50k_base", "text-similarity-ada-001": "r50k_base",
    "text-search-davinci-doc-001": "r50k_base", "text-search-curie-doc-001": "r50k_base",
    "text-search-babbage-doc-001": "r50k_base", "text-search-ada-doc-001": "r50k_base",
    "code-search-babbage-code-001": "r50k_base", "code-search-ada-code-001": "r50k_base",
    "gpt2": "gpt2", "gpt-2": "gpt2",
}

# A pat_str goes to the C library as given: tk_pattern_spec (tokenizer/pattern.c's one table of spellings:
# tiktoken's, the C library's own tk_pattern_regex and the original GPT-2 / Llama 3 forms) runs a built-in
# pre-tokenizer's exact spelling with the built-in scanner, and any other regex through the general regex engine
# with tiktoken's meaning (tk_set_pretokenizer; unsupported constructs are refused by name).


def _np():
    try:
        import numpy
    except ImportError as e:  # pragma: no cover - numpy is a dependency
        raise ImportError("this method needs numpy (pip install numpy)") from e
    return numpy


class Encoding:
    """A tokenizer with tiktoken's ``Encoding`` methods.

    Load one with :func:`get_encoding` (a name, resolved like the CLI's
    ``--tokenizer NAME``) or :meth:`Encoding.from_file` (a ``.tiktoken`` rank
    file, a HF ``tokenizer.json``, or a folder with GPT-2's ``encoder.json`` +
    ``vocab.bpe``). Encoding releases the GIL; batches run on C threads.
    """

    def __init__(self, spec=None, pattern=None, *, name=None, pat_str=None, mergeable_ranks=None,
                 special_tokens=None, explicit_n_vocab=None, normalize=None):
        if spec is None and mergeable_ranks is not None:
            if normalize is not None:
                raise TypeError("Encoding(mergeable_ranks=...) takes no normalize (tiktoken's has none: normalize "
                                "the text before encode, as Qwen's code does)")
            self._init_ranks(name, pat_str, mergeable_ranks, special_tokens or {}, explicit_n_vocab)
            return
        if spec is None or pat_str is not None or mergeable_ranks is not None or special_tokens is not None:
            raise TypeError("Encoding(spec[, pattern]) loads a file or name; Encoding(name=, pat_str=, "
                            "mergeable_ranks=, special_tokens=[, explicit_n_vocab=]) builds one in memory")
        self._spec = os.fspath(spec)
        self._pattern = pattern
        self._normalize = normalize
        self._ranks_args = None
        self._core = _core.Tokenizer(self._spec, pattern, normalize)
        self._finish(name or self._core.name)
        if explicit_n_vocab is not None and explicit_n_vocab != self.n_vocab:
            raise ValueError(f"explicit_n_vocab {explicit_n_vocab} != {self.n_vocab} (ranks + special tokens)")

    def _init_ranks(self, name, pat_str, mergeable_ranks, special_tokens, explicit_n_vocab):
        """tiktoken's constructor: ranks (bytes -> rank) contiguous from 0, any pat_str (a built-in
        pre-tokenizer's spelling runs the built-in; any other regex the general regex engine with tiktoken's
        meaning), specials str -> id."""
        if not isinstance(name, str):
            raise TypeError("Encoding(name=...): a str")
        if not isinstance(pat_str, str):
            raise TypeError(f"Encoding {name!r}: pat_str must be a str, not {type(pat_str).__name__}")
        pattern = pat_str
        n = len(mergeable_ranks)
        tokens = [None] * n
        for tok, rank in mergeable_ranks.items():
            if not isinstance(rank, int) or not 0 <= rank < n or tokens[rank] is not None:
                raise ValueError(f"Encoding {name!r}: mergeable_ranks must hold the ranks 0..{n - 1} once each "
                                 f"(token {tok!r} has rank {rank!r})")
            tokens[rank] = bytes(tok)
        if explicit_n_vocab is not None:
            if len(mergeable_ranks) + len(special_tokens) != explicit_n_vocab:
                raise ValueError(f"Encoding {name!r}: {len(mergeable_ranks)} ranks + {len(special_tokens)} special "
                                 f"tokens != explicit_n_vocab {explicit_n_vocab}")
            if max([n - 1, *special_tokens.values()]) != explicit_n_vocab - 1:
                raise ValueError(f"Encoding {name!r}: the largest id is not explicit_n_vocab - 1")
        self._spec = None
        self._pattern = pattern
        self._ranks_args = (name, pat_str, mergeable_ranks, dict(special_tokens), explicit_n_vocab)
        self._core = _core.Tokenizer.create(tokens, pattern, dict(special_tokens), name.encode("utf-8"))
        self._finish(name)
        self.pat_str = pat_str  # as given (tiktoken's _pat_str)

    def _finish(self, name):
        self.name = name
        self._special_tokens = self._core.specials
        self.special_tokens_set = frozenset(self._special_tokens)
        self.n_vocab = self._core.n_vocab
        self.max_token_value = self.n_vocab - 1
        self.pat_str = self._core.pat_str

    @classmethod
    def from_file(cls, path, pattern=None, *, name=None, normalize=None):
        """Every tokenizer kind the CLI loads: .tiktoken (+ .meta.json), tokenizer.json, encoder.json+vocab.bpe folder.

        ``pattern`` ("gpt2", "cl100k", "o200k", or a regex in tiktoken's syntax) is needed for a rank file that is
        not one of the known vocabularies; ``normalize`` ("nfc", "nfkc") normalizes a rank file's text first (the
        CLI's --pattern / --normalize; Qwen v1's qwen.tiktoken: its PAT_STR and "nfc").
        """
        return cls(path, pattern, name=name, normalize=normalize)

    def __repr__(self):
        return f"<Encoding {self.name!r}>"

    def __reduce__(self):  # pickles by spec (DataLoader workers with spawn reload it), or by its ranks
        if getattr(self, "_derived", None):
            return (get_encoding, (self._derived,))
        if self._ranks_args is not None:
            return (_rebuild_ranks, self._ranks_args)
        return (_rebuild, (self._spec, self._pattern, self.name, getattr(self, "_normalize", None)))

    # ------------------------------------------------------------ tiktoken's private fields, read by its users
    @property
    def _pat_str(self):
        return self.pat_str

    @property
    def _mergeable_ranks(self):
        """dict bytes -> rank of every mergeable token (built on first use)."""
        r = self.__dict__.get("_ranks_cache")
        if r is None:
            r = {self._core.token_bytes(i): i for i in range(self._core.n_ranks)}
            self.__dict__["_ranks_cache"] = r
        return r

    # ------------------------------------------------------------ properties
    @property
    def eot_token(self):
        eot = self._core.eot
        if eot is None:
            raise KeyError("<|endoftext|>")
        return eot

    @property
    def fingerprint(self):
        """sha256 (hex) over ranks, specials and pattern: what shard sets record."""
        return self._core.fingerprint

    # ------------------------------------------------------------ specials
    def _allowed(self, allowed_special, disallowed_special):
        if allowed_special == "all":
            allowed = self.special_tokens_set
        else:
            allowed = frozenset(allowed_special) & self.special_tokens_set
        if disallowed_special == "all":
            disallowed = self.special_tokens_set - allowed
        else:
            disallowed = frozenset(disallowed_special)
        if not allowed:
            c_allowed = None
        elif allowed == self.special_tokens_set:
            c_allowed = "all"
        else:
            c_allowed = tuple(allowed)
        return c_allowed, disallowed

    @staticmethod
    def _check_disallowed(text, disallowed):
        if not disallowed:
            return
        first = None
        for tok in disallowed:
            i = text.find(tok)
            if i >= 0 and (first is None or i < first[0] or (i == first[0] and len(tok) > len(first[1]))):
                first = (i, tok)
        if first is not None:
            tok = first[1]
            raise ValueError(
                f"Encountered text corresponding to disallowed special token {tok!r}.\n"
                f"If you want this text to be encoded as a special token, pass it to `allowed_special`, "
                f"e.g. `allowed_special={{{tok!r}, ...}}`.\n"
                f"If you want this text to be encoded as normal text, disable the check for this token by passing "
                f"`disallowed_special=(enc.special_tokens_set - {{{tok!r}}})`.\n"
                "To disable this check for all special tokens, pass `disallowed_special=()`.\n")

    # ------------------------------------------------------------ encoding
    def encode_ordinary(self, text):
        """Ids of text; special-token text is ordinary text."""
        return self._core.encode_ordinary(text)

    def _encode_bytes(self, text):
        """Ids of any bytes, invalid UTF-8 included, as tiktoken's ``_encode_bytes`` gives them
        (decode_bytes returns the bytes)."""
        return self._core.encode_bytes(text)

    def encode(self, text, *, allowed_special=frozenset(), disallowed_special="all", add_special_tokens=True):
        """Ids of text. Special tokens in ``allowed_special`` ("all" or a set) map to their ids; text matching a
        ``disallowed_special`` token (default: every special not allowed) raises ValueError, as in tiktoken.

        ``add_special_tokens`` (default True, as HF ``tokenizers``' ``Tokenizer.encode``): a tokenizer.json's
        post_processor is applied, e.g. Llama 3's <|begin_of_text|> first. Rank files, encoder.json and
        SentencePiece models have none, so their ids are tiktoken's either way. The other methods
        (encode_ordinary, encode_batch, encode_to_numpy, count, the CLI) never add them: the CLI frames
        documents with --bos/--eos instead."""
        if not isinstance(text, str):
            raise TypeError(f"encode: text must be a str, not {type(text).__name__}")
        c_allowed, disallowed = self._allowed(allowed_special, disallowed_special)
        self._check_disallowed(text, disallowed)
        ids = self._core.encode(text, c_allowed)
        if add_special_tokens:
            bos, eos = self._core.post_process
            if bos is not None:
                ids.insert(0, bos)
            if eos is not None:
                ids.append(eos)
        return ids

    def encode_to_numpy(self, text, *, allowed_special=frozenset(), disallowed_special="all"):
        """Like encode, as a numpy uint32 array (no Python ints are made)."""
        if not isinstance(text, str):
            raise TypeError(f"encode_to_numpy: text must be a str, not {type(text).__name__}")
        c_allowed, disallowed = self._allowed(allowed_special, disallowed_special)
        self._check_disallowed(text, disallowed)
        return _np().frombuffer(self._core.encode_to_buffer(text, c_allowed), dtype="uint32")

    def encode_ordinary_batch(self, text, *, num_threads=8):
        """encode_ordinary over a list of str on num_threads C threads (0: all cores)."""
        return self._core.encode_batch(text, num_threads)

    def encode_batch(self, text, *, num_threads=8, allowed_special=frozenset(), disallowed_special="all"):
        c_allowed, disallowed = self._allowed(allowed_special, disallowed_special)
        if disallowed:
            for t in text:
                self._check_disallowed(t, disallowed)
        return self._core.encode_batch(text, num_threads, c_allowed)

    def encode_ordinary_batch_to_numpy(self, text, *, num_threads=8):
        """(ids, offsets): every document's ids in one uint32 array; document i is ids[offsets[i]:offsets[i+1]]."""
        np = _np()
        ids, off = self._core.encode_batch(text, num_threads, None, True)
        return np.frombuffer(ids, dtype="uint32"), np.frombuffer(off, dtype="uint64")

    def encode_single_token(self, text_or_bytes):
        """The id of one token given as bytes or str (specials included); KeyError if it is not one token."""
        if isinstance(text_or_bytes, str):
            if text_or_bytes in self._special_tokens:
                return self._special_tokens[text_or_bytes]
            text_or_bytes = text_or_bytes.encode("utf-8")
        r = self._core.rank_of(bytes(text_or_bytes))
        if r < 0:
            try:
                return self._special_tokens[text_or_bytes.decode("utf-8")]
            except (UnicodeDecodeError, KeyError):
                raise KeyError(text_or_bytes) from None
        return r

    def count(self, text):
        """Number of tokens of text (encode_ordinary) without building the list."""
        return self._core.count(text)

    # ------------------------------------------------------------ decoding
    def decode_bytes(self, tokens):
        """Bytes of the ids (a list, array or numpy array); MkshardsError names an unknown id."""
        return self._core.decode_bytes(tokens)

    def decode(self, tokens, errors="replace"):
        """Text of the ids; invalid UTF-8 is handled by ``errors`` (default "replace", like tiktoken)."""
        return self._core.decode_bytes(tokens).decode("utf-8", errors=errors)

    def decode_single_token_bytes(self, token):
        return self._core.token_bytes(token)

    def decode_tokens_bytes(self, tokens):
        return [self._core.token_bytes(t) for t in tokens]

    def decode_with_offsets(self, tokens):
        """(text, offsets): offsets[i] is the character index where token i starts (tiktoken's rule)."""
        token_bytes = self.decode_tokens_bytes(tokens)
        text_len = 0
        offsets = []
        for b in token_bytes:
            offsets.append(max(0, text_len - (0x80 <= b[0] < 0xC0)) if b else text_len)
            text_len += sum(1 for c in b if not 0x80 <= c < 0xC0)
        return b"".join(token_bytes).decode("utf-8", errors="strict"), offsets

    def decode_batch(self, batch, *, errors="replace", num_threads=8):
        return [self.decode(t, errors=errors) for t in batch]

    def decode_bytes_batch(self, batch, *, num_threads=8):
        return [self.decode_bytes(t) for t in batch]

    # ------------------------------------------------------------ vocabulary
    def token_byte_values(self):
        """Bytes of every mergeable token, sorted."""
        return self._core.token_byte_values()

    def is_special_token(self, token):
        return token in self._special_tokens.values()


def _rebuild(spec, pattern, name, normalize=None):
    return Encoding(spec, pattern, name=name, normalize=normalize)


def _rebuild_ranks(name, pat_str, mergeable_ranks, special_tokens, explicit_n_vocab):
    return Encoding(name=name, pat_str=pat_str, mergeable_ranks=mergeable_ranks, special_tokens=special_tokens,
                    explicit_n_vocab=explicit_n_vocab)


def _find_rank_file(files, url, sha256):
    """The rank file of a derived name: $MKS_VOCAB_DIR/<file>, else tiktoken's cache (sha1 of the URL), checked
    against the sha256 tiktoken expects (a file that differs is refused, as tiktoken refuses it)."""
    import hashlib
    import tempfile
    places = []
    vd = os.environ.get("MKS_VOCAB_DIR")
    old = os.environ.get("MKSHARDS_VOCAB_DIR")
    if old:  # the old name, read for one release as the C side reads it (tokenizer/mks_env.c)
        import warnings
        warnings.warn("environment variable MKSHARDS_VOCAB_DIR is " +
                      ("ignored: MKS_VOCAB_DIR is set" if vd else "deprecated: set MKS_VOCAB_DIR instead") +
                      " (old names are dropped in the next release)", DeprecationWarning, stacklevel=3)
        vd = vd or old
    if vd:
        places.append(os.path.join(vd, files))
    cd = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or \
        os.path.join(tempfile.gettempdir(), "data-gym-cache")
    places.append(os.path.join(cd, hashlib.sha1(url.encode()).hexdigest()))
    for path in places:
        if os.path.isfile(path):
            with open(path, "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
            if got != sha256:
                raise _core.MkshardsError(f"{path}: sha256 {got} is not the {files} tiktoken expects ({sha256})")
            return path
    raise _core.MkshardsError(f"vocabulary file {files} not found: looked in $MKS_VOCAB_DIR "
                              f"({vd or 'unset'}) and in tiktoken's cache {cd}; set MKS_VOCAB_DIR to a folder "
                              f"holding {files}")


def _load_derived(name):
    files, url, sha256, pattern, specials, n_vocab = _DERIVED[name]
    base = Encoding(_find_rank_file(files, url, sha256), pattern)
    tokens = [base._core.token_bytes(i) for i in range(base._core.n_ranks)]
    enc = Encoding.__new__(Encoding)
    enc._spec = None
    enc._pattern = pattern
    enc._ranks_args = None
    enc._core = _core.Tokenizer.create(tokens, pattern, dict(specials), name.encode())
    enc._finish(name)
    if n_vocab is not None and enc.n_vocab != n_vocab:
        raise _core.MkshardsError(f"{name}: {enc.n_vocab} ids, tiktoken's explicit_n_vocab is {n_vocab}")
    enc._derived = name
    return enc


_cache = {}
_lock = threading.Lock()


def get_encoding(encoding_name):
    """A named encoding (gpt2, r50k_base, cl100k_base, o200k_base), found as the CLI finds it: in
    $MKS_VOCAB_DIR (<name>.tiktoken) and in tiktoken's cache ($TIKTOKEN_CACHE_DIR). Nothing is downloaded.
    Loaded once per process. Unknown or missing: MkshardsError (a ValueError) with the C message."""
    if not isinstance(encoding_name, str):
        raise TypeError("encoding_name must be a str")
    with _lock:
        enc = _cache.get(encoding_name)
        if enc is None:
            if encoding_name in _DERIVED:
                enc = _load_derived(encoding_name)
            else:
                enc = Encoding(encoding_name, name=encoding_name if encoding_name in _NAMES else None)
            _cache[encoding_name] = enc
        return enc


@functools.lru_cache(maxsize=None)
def list_encoding_names():
    """tiktoken's names; p50k_base, p50k_edit and o200k_harmony load when their rank file is present."""
    return list(_ALL_NAMES)


def encoding_name_for_model(model_name):
    """tiktoken's encoding name of an OpenAI model (exact names, then prefixes); KeyError if unknown."""
    if model_name in MODEL_TO_ENCODING:
        return MODEL_TO_ENCODING[model_name]
    for prefix, name in MODEL_PREFIX_TO_ENCODING.items():
        if model_name.startswith(prefix):
            return name
    raise KeyError(f"Could not automatically map {model_name} to a tokeniser. "
                   "Please use `mkshards.get_encoding` to explicitly get the tokeniser you expect.") from None


def encoding_for_model(model_name):
    """The encoding of an OpenAI model (get_encoding(encoding_name_for_model(model_name)))."""
    return get_encoding(encoding_name_for_model(model_name))
