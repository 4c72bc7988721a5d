"""tiktoken-compatible Encoding over the C tokenizer (tokenizer/tk.h)."""
import functools
import os
import threading

from . import _core

__all__ = ["Encoding", "get_encoding", "list_encoding_names"]

# Names tk_load resolves (in $MKS_VOCAB_DIR and tiktoken's cache).
_NAMES = ("gpt2", "r50k_base", "cl100k_base", "o200k_base")


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

    def __init__(self, spec, pattern=None, *, name=None):
        self._spec = os.fspath(spec)
        self._pattern = pattern
        self._core = _core.Tokenizer(self._spec, pattern)
        self.name = name or self._core.name
        self._special_tokens = self._core.specials
        self.special_tokens_set = frozenset(self._special_tokens)
        self.n_vocab = self._core.n_vocab
        self.max_token_value = self.n_vocab - 1
        self.pat_str = self._core.pat_str

    @classmethod
    def from_file(cls, path, pattern=None, *, name=None):
        """Every tokenizer kind the CLI loads: .tiktoken (+ .meta.json), tokenizer.json, encoder.json+vocab.bpe folder.

        ``pattern`` ("gpt2", "cl100k", "o200k") is needed for a rank file that is not one of the known vocabularies.
        """
        return cls(path, pattern, name=name)

    def __repr__(self):
        return f"<Encoding {self.name!r}>"

    def __reduce__(self):  # pickles by spec: DataLoader workers with spawn reload it
        return (_rebuild, (self._spec, self._pattern, self.name))

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

    def encode(self, text, *, allowed_special=frozenset(), disallowed_special="all"):
        """Ids of text. Special tokens in ``allowed_special`` ("all" or a set) map to their ids; text matching a
        ``disallowed_special`` token (default: every special not allowed) raises ValueError, as in tiktoken."""
        c_allowed, disallowed = self._allowed(allowed_special, disallowed_special)
        self._check_disallowed(text, disallowed)
        return self._core.encode(text, c_allowed)

    def encode_to_numpy(self, text, *, allowed_special=frozenset(), disallowed_special="all"):
        """Like encode, as a numpy uint32 array (no Python ints are made)."""
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


def _rebuild(spec, pattern, name):
    return Encoding(spec, pattern, name=name)


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
            enc = Encoding(encoding_name, name=encoding_name if encoding_name in _NAMES else None)
            _cache[encoding_name] = enc
        return enc


@functools.lru_cache(maxsize=None)
def list_encoding_names():
    return list(_NAMES)
