"""What the two references of a rank file's own pre-tokenizer share (make_tk_pattern_refs.py: ids of real text;
make_tk_pattern_scan.py: the full-range scan of each construct): Kimi K2's pattern and the digest of an id list."""
import hashlib
import struct

# Kimi K2's pat_str (tokenization_kimi.py): scripts, class intersection (&&) and nested classes
KIMI = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])


def ids_sha(ids):
    """First 16 hex digits of sha256 over the ids as little-endian uint32 (test_ids_sha in tests/test_common.c)."""
    return hashlib.sha256(struct.pack("<%dI" % len(ids), *ids)).hexdigest()[:16]
