"""mkshards: tokenizer (tiktoken-compatible), token shard sets and dataset checks from Python.

    import mkshards
    enc = mkshards.get_encoding("cl100k_base")      # or mkshards.Encoding.from_file("tokenizer.json")
    ids = enc.encode_ordinary_batch(docs, num_threads=0)
    ss = mkshards.ShardSet("shards/")               # ss[i] -> dict of numpy arrays
    report = mkshards.lint(["data/"], tokenizer=enc, seq_len=2048)
    mkshards.build(["data/"], "shards/", tokenizer="cl100k_base", seq_len=2048, progress=print)

PyTorch datasets: ``import mkshards.torch`` (needs torch). The C library does the work (GIL released).
"""
from ._core import MkshardsError, TokenIdOverflowError, UnknownTokenError, __version__
from ._encoding import Encoding, encoding_for_model, encoding_name_for_model, get_encoding, list_encoding_names
from ._pipeline import build, hist, lint, lint_exit_code
from ._shards import ShardSet
from . import data

__all__ = ["__version__", "MkshardsError", "UnknownTokenError", "TokenIdOverflowError", "Encoding", "get_encoding",
           "list_encoding_names", "encoding_for_model", "encoding_name_for_model", "ShardSet", "build", "lint",
           "hist", "lint_exit_code", "data"]
