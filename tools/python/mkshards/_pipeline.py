"""lint / hist in-process (ds_analyze): the same reports as `mkshards lint --json` / `mkshards hist --json`."""
import json
import os
import re

from . import _core
from ._encoding import Encoding

__all__ = ["build", "lint", "hist", "lint_exit_code"]


def _is_path(x):
    return isinstance(x, (str, bytes, os.PathLike))


_ARROW_BATCH_ROWS = 4096  # rows of a Hugging Face dataset fetched at a time
_COLUMNAR = (".parquet", ".arrow")
# the other files the CLI's folder walk reads (reader.c classify)
_DATA_EXT = re.compile(r"\.(jsonl|ndjson|json|txt|text)(\.zst|\.zstd|\.gz)?$")


def _arrow_stream(obj):
    """What mkshards._core reads an Arrow source from: the object's Arrow C stream as a PyCapsule (the
    __arrow_c_stream__ protocol, pyarrow >= 14, also polars / DuckDB / nanoarrow objects), else a
    pyarrow.RecordBatchReader (exported through its _export_to_c). C reads the text column's offsets and data
    buffers in place: no Python object per row."""
    if hasattr(obj, "__arrow_c_stream__"):
        return obj.__arrow_c_stream__()
    return obj


def _batches_reader(batches):
    """A pyarrow.RecordBatchReader over an iterable of RecordBatches / Tables (the first one gives the schema)."""
    import pyarrow as pa
    it = iter(batches)

    def flat():
        for b in it:
            yield from (b.to_batches() if isinstance(b, pa.Table) else [b])

    gen = flat()
    first = next(gen, None)
    if first is None:
        return pa.RecordBatchReader.from_batches(pa.schema([]), [])
    schema = first.schema

    def rest():
        yield first
        for b in gen:
            yield b if b.schema == schema else b.cast(schema)

    return pa.RecordBatchReader.from_batches(schema, rest())


def _columnar_files(paths):
    """The .parquet / .arrow files among paths in the CLI's order (a folder: its entries sorted by their bytes,
    recursively, hidden names and symlinked folders skipped), or None when any input is something else (the C
    readers take those, and refuse .parquet / .arrow beside them)."""
    out = []

    def walk(d):
        for n in sorted(os.listdir(os.fsencode(d))):
            if n.startswith(b"."):
                continue
            p = os.path.join(d, os.fsdecode(n))
            if os.path.isdir(p) and not os.path.islink(p):
                if not walk(p):
                    return False
            elif p.endswith(_COLUMNAR):
                out.append(p)
            elif _DATA_EXT.search(p):
                return False
        return True

    for p in paths:
        if os.path.isdir(p):
            if not walk(p):
                return None
        elif p.endswith(_COLUMNAR):
            out.append(p)
        else:
            return None
    return out or None


def _bytes_type(pa, t):
    """t with every string type in it (list items, struct fields, map entries, dictionary values) as binary:
    the same buffers, so a view validates their structure without judging UTF-8."""
    if pa.types.is_string(t):
        return pa.binary()
    if pa.types.is_large_string(t):
        return pa.large_binary()
    if hasattr(pa.types, "is_string_view") and pa.types.is_string_view(t):
        return pa.binary_view()
    if pa.types.is_map(t):
        return pa.map_(_bytes_type(pa, t.key_type), t.item_field.with_type(_bytes_type(pa, t.item_type)),
                       t.keys_sorted)
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_bytes_type(pa, t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_bytes_type(pa, t.value_type)), t.list_size)
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_bytes_type(pa, t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_bytes_type(pa, t.field(i).type)) for i in range(t.num_fields)])
    return t


def _validate_structure(pa, b):
    """A batch checked in full (offsets, lengths, buffer sizes) as the CLI's reader checks it, with its strings
    as bytes: invalid UTF-8 in a document is that record's reject (utf8-invalid, as a JSONL line with a bad
    byte), not the end of the run. A type pyarrow cannot view so is validated as it is (UTF-8 included)."""
    try:
        cols = [c.view(_bytes_type(pa, c.type)) for c in b.columns]
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
        b.validate(full=True)
        return
    pa.RecordBatch.from_arrays(cols, names=b.schema.names).validate(full=True)


def _columnar_reader(files, columns):
    """Parquet / Arrow IPC files read by pyarrow (the module is built without Arrow's C++ libraries, so that it
    never pins one pyarrow's libraries into a process that imports another): one RecordBatchReader over the
    files in order, only the columns read (the text column; a chat format's), one row group / record batch in
    memory at a time."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(f"{files[0]}: reading Parquet / Arrow IPC from Python needs pyarrow "
                          "(pip install pyarrow), or give the file to the mkshards CLI") from None

    def checked(batches):
        # a crafted file: pyarrow's readers check the structure, not every offset (as the CLI, validate in full
        # before C reads a row: pyarrow.ArrowInvalid stops the run, naming the batch)
        for b in batches:
            _validate_structure(pa, b)
            yield b

    def batches():
        for f in files:
            if f.endswith(".parquet"):
                # as the CLI's reader: pages read through a 1 MiB buffer and decoded 1024 rows at a time, so
                # memory is a batch of the text column, not its row group (pyarrow's default: 65,536 rows)
                pf = pq.ParquetFile(f, buffer_size=1 << 20, pre_buffer=False)
                cols = [c for c in columns if c in pf.schema_arrow.names] or None
                yield from pf.iter_batches(batch_size=1024, columns=cols, use_threads=False)
            else:
                with open(f, "rb") as fh:
                    magic = fh.read(6)
                src = pa.memory_map(f)
                rd = pa.ipc.open_file(src) if magic == b"ARROW1" else pa.ipc.open_stream(src)
                if magic == b"ARROW1":
                    for i in range(rd.num_record_batches):
                        yield rd.get_batch(i)
                else:
                    yield from rd

    return _batches_reader(checked(batches()))


def _chat_columns(chat, field):
    """The top-level columns a chat format reads (the messages field's first key, prompt, completion, and for
    auto the text field's), or None for text (ds_ajson_format_paths in C says the same)."""
    fmt = (chat or {}).get("format")
    if fmt in (None, "text"):
        return None
    mf = (chat or {}).get("messages_field") or "messages"
    cols = []
    if fmt in ("chat", "auto"):
        cols.append(mf.split(".")[0])
    if fmt in ("prompt-completion", "auto"):
        cols += ["prompt", "completion"]
    if fmt == "auto":
        cols.append((field or "text").split(".")[0])
    return cols


def _json_records(it):
    """Chat formats from an iterable: each dict as the JSONL line json.dumps writes for it (a str item is taken as
    that line already). Strs that are not Unicode: bytes decoded with surrogateescape (lone U+DC80..U+DCFF) go
    back to those bytes, the line they were read from (utf8-invalid, as the CLI rejects it); other lone
    surrogates (text cut inside a UTF-16 pair) are written with json.dumps' default \\u escapes, which the chat
    parser refuses as the CLI does (json-malformed). One reject each; the run goes on. A dict json.dumps cannot
    write (bytes values, ...) goes as it is: C rejects that item."""
    for x in it:
        if isinstance(x, dict):
            try:
                s = json.dumps(x, ensure_ascii=False, separators=(",", ":"))
                try:
                    s.encode("utf-8")
                except UnicodeEncodeError:
                    try:
                        s = s.encode("utf-8", "surrogateescape")
                    except UnicodeEncodeError:
                        s = json.dumps(x, separators=(",", ":"))
                x = s
            except (TypeError, ValueError):
                pass
        yield x


def _source(inputs, field, chat=None):
    """None when inputs name files the C readers take (a path or a list/tuple of paths); else the source spec
    mkshards._core reads: {"stream": an Arrow C stream} for Arrow data (and .parquet / .arrow files, read through
    pyarrow), or {"iter": an iterator of items} (str documents, or dicts walked by the field's keys; for a chat
    format, records as JSON text)."""
    files = None
    if _is_path(inputs) or (isinstance(inputs, (list, tuple)) and all(_is_path(x) for x in inputs)):
        # a list or tuple of str names files, as before; documents in a list go as iter(docs) (or dicts)
        paths = [os.fsdecode(p) for p in ([inputs] if _is_path(inputs) else inputs)]
        files = _columnar_files(paths)
        if files is None:
            if any(p.endswith(_COLUMNAR) for p in paths):
                raise ValueError("Parquet / Arrow IPC files are read through pyarrow here: give them apart from "
                                 "other inputs (or all inputs to the mkshards CLI)")
            return None
    field = "text" if field is None else field
    if not isinstance(field, str):
        raise TypeError(f"field: a str, not {type(field).__name__}")
    keys = tuple(field.split("."))
    if not all(keys):
        raise ValueError(f"bad field {field!r}: empty path component")
    spec = {"field": keys, "field_name": field, "values": False}
    wanted = _chat_columns(chat, field) or [keys[0]]  # the columns read
    if files is not None:
        spec["stream"] = _arrow_stream(_columnar_reader(files, wanted))
        return spec
    mod = type(inputs).__module__ or ""
    if mod.startswith("pyarrow"):
        import pyarrow as pa
        if isinstance(inputs, pa.Table):
            names = inputs.schema.names
            cols = [c for c in dict.fromkeys(wanted) if c in names]
            reader = inputs.select(cols).to_reader() if cols else inputs.to_reader()
        elif isinstance(inputs, pa.RecordBatch):
            reader = pa.Table.from_batches([inputs]).to_reader()
        elif isinstance(inputs, pa.RecordBatchReader):
            reader = inputs
        elif hasattr(inputs, "scanner"):  # pyarrow.dataset.Dataset: only the text column is read
            cols = [c for c in dict.fromkeys(wanted) if c in inputs.schema.names] or None
            reader = inputs.scanner(columns=cols, use_threads=False).to_reader()
        elif hasattr(inputs, "to_reader"):  # a Scanner
            reader = inputs.to_reader()
        else:
            raise TypeError(f"{type(inputs).__name__}: a pyarrow Table, RecordBatch, RecordBatchReader or dataset")
        spec["stream"] = _arrow_stream(reader)
        return spec
    if mod.startswith("datasets") and hasattr(inputs, "iter"):
        # a Hugging Face Dataset / IterableDataset: Arrow batches where it gives them, else dicts of lists
        ds = inputs
        try:
            tables = ds.with_format("arrow").iter(batch_size=_ARROW_BATCH_ROWS)
            reader = _batches_reader(b if hasattr(b, "schema") else _dict_batch(b) for b in tables)
        except (AttributeError, NotImplementedError, ValueError):
            reader = _batches_reader(_dict_batch(b) for b in ds.iter(batch_size=_ARROW_BATCH_ROWS))
        spec["stream"] = _arrow_stream(reader)
        return spec
    if hasattr(inputs, "__arrow_c_stream__"):  # polars, DuckDB, nanoarrow, ...: any Arrow C stream producer
        spec["stream"] = inputs.__arrow_c_stream__()
        return spec
    if type(inputs).__name__ == "PyCapsule":  # such a stream's capsule itself (C checks its name)
        spec["stream"] = inputs
        return spec
    try:
        spec["iter"] = iter(inputs) if chat is None or _chat_columns(chat, field) is None else \
            _json_records(iter(inputs))
    except TypeError:
        raise TypeError(f"inputs: paths or an iterable of documents, not {type(inputs).__name__}") from None
    return spec


def _dict_batch(b):
    import pyarrow as pa
    return pa.RecordBatch.from_pydict(b)


def _inputs(inputs):
    if isinstance(inputs, (str, bytes, os.PathLike)):
        inputs = [inputs]
    out = [os.fspath(p) for p in inputs]
    if not out:
        raise ValueError("no inputs given")
    return out


def _tokenizer(tokenizer, pattern):
    if tokenizer is None:
        return None
    if isinstance(tokenizer, Encoding):
        return tokenizer._core
    if isinstance(tokenizer, _core.Tokenizer):
        return tokenizer
    return _core.Tokenizer(os.fspath(tokenizer), pattern)


def _zero(v):
    """None -> 0 (the default); anything else as given, for C to check."""
    return 0 if v is None else v


def _part(part):
    """part as (K, N): "K/N" (decimal digits only) or a pair; the numbers are checked in C."""
    if isinstance(part, str):
        ks, sep, ns = part.partition("/")
        if not (sep and ks.isdigit() and ns.isdigit() and ks.isascii() and ns.isascii()):
            raise ValueError(f"part {part!r}: 'K/N' with 1 <= K <= N")
        return int(ks), int(ns)
    try:
        k, n = part
    except (TypeError, ValueError):
        raise TypeError(f"part: 'K/N' or a pair (K, N), not {part!r}") from None
    return k, n


def _analyze(inputs, tokenizer, pattern, lint, hist, seq_len, max_doc_bytes, max_examples, field, doc_sep, threads,
             max_record_bytes, cut_overlong, outlier_factor, long_run_bytes, long_line_bytes, min_bytes_per_token,
             svg, progress, chat=None):
    tok = _tokenizer(tokenizer, pattern)
    src = _source(inputs, field, chat)
    ins = _inputs(inputs) if src is None else src
    if progress is not None:
        progress({"stage": "start", "inputs": len(ins) if src is None else 0})
    # numbers go to C as given: it checks each against the CLI option's range (ValueError naming it), where
    # int() would truncate 2048.5 and the C conversion wrap 2**32 + 2048
    lint_json, hist_json, code, docs = _core.analyze(
        ins, tok, lint=lint, hist=hist, seq_len=_zero(seq_len), max_doc_bytes=_zero(max_doc_bytes),
        max_examples=max_examples, threads=_zero(threads), field=field,
        doc_sep=doc_sep, max_record_bytes=_zero(max_record_bytes), cut_overlong=bool(cut_overlong),
        outlier_factor=float(outlier_factor or 0), long_run_bytes=_zero(long_run_bytes),
        long_line_bytes=_zero(long_line_bytes), min_bytes_per_token=float(min_bytes_per_token or 0),
        svg=None if svg is None else os.fspath(svg), callback=progress, **(chat or {}))
    lint_d = json.loads(lint_json) if lint_json else None
    hist_d = json.loads(hist_json) if hist_json else None
    if progress is not None:
        progress({"stage": "done", "exit_code": code})
    return lint_d, hist_d, code


def _chat(format, chat_template, loss_on, messages_field):
    """The fine-tuning record options as _core takes them (None: not given; C checks them as the CLI does)."""
    return {"format": format, "chat_template": None if chat_template is None else os.fspath(chat_template),
            "loss_on": loss_on, "messages_field": messages_field}


def lint(inputs, *, tokenizer=None, seq_len=0, max_doc_bytes=0, max_examples=None, field=None, doc_sep="file",
         threads=0, hist=False, pattern=None, max_record_bytes=0, cut_overlong=False, outlier_factor=0,
         long_run_bytes=0, long_line_bytes=0, min_bytes_per_token=0, progress=None, format=None, chat_template=None,
         loss_on=None, messages_field=None):
    """`mkshards lint --json`: the report as a dict (with ``hist=True``: ``{"lint": ..., "hist": ...}`` like
    ``lint --hist --json``). Options are the CLI's (``seq_len`` = ``-L``, ``threads`` = ``-j``, ...); tokenizer is a
    name, a path, an Encoding or None (byte checks only). The CLI's exit status (0 clean, 1 warnings, 2 errors) is
    ``mkshards.lint_exit_code(report)``.

    ``progress`` (optional) is called with a dict: ``{"stage": "start", "inputs": n}``, then after every batch of
    records (about 8 MiB) ``{"stage": "progress", "records", "bytes_in", "seconds", "last"}``, and at the end
    ``{"stage": "done", "exit_code": ...}``. A true return value or an exception from it cancels (MkshardsError
    "canceled", or that exception); Ctrl-C cancels and raises KeyboardInterrupt. A canceled run writes nothing.

    Fine-tuning records (docs/chat.md), as the CLI's options: ``format`` = ``--format`` ("text", "chat",
    "prompt-completion", "auto"), ``chat_template`` = ``--chat-template`` (a built-in name, "auto" for the
    tokenizer folder's tokenizer_config.json, or a file), ``loss_on`` = ``--loss-on`` ("assistant", "completion",
    "all"), ``messages_field`` = ``--messages-field``. Without a tokenizer nor a template only the messages are
    checked. Records are read from JSONL files (a Python source gives text only)."""
    if hist and tokenizer is None:
        raise ValueError("hist=True needs a tokenizer")
    lint_d, hist_d, code = _analyze(inputs, tokenizer, pattern, True, bool(hist), seq_len, max_doc_bytes,
                                    max_examples, field, doc_sep, threads, max_record_bytes, cut_overlong,
                                    outlier_factor, long_run_bytes, long_line_bytes, min_bytes_per_token, None,
                                    progress, _chat(format, chat_template, loss_on, messages_field))
    if hist:
        return {"lint": lint_d, "hist": hist_d}
    return lint_d


def lint_exit_code(report):
    """0 clean (info only), 1 warnings, 2 errors: `mkshards lint`'s exit status for a lint() report."""
    if "lint" in report and "hist" in report:
        report = report["lint"]
    sev = {f["severity"] for f in report.get("findings", []) if f.get("count", 0) > 0}
    return 2 if "error" in sev else 1 if "warning" in sev else 0


def hist(inputs, *, tokenizer, seq_len=0, threads=0, field=None, doc_sep="file", svg=None, pattern=None,
         max_record_bytes=0, cut_overlong=False, progress=None, format=None, chat_template=None, loss_on=None,
         messages_field=None):
    """`mkshards hist --json`: token-count statistics as a dict; ``svg`` writes the chart like ``--svg`` (not on a
    canceled run). ``progress``, cancellation and the fine-tuning record options (``format``, ``chat_template``,
    ``loss_on``, ``messages_field``: conversation lengths and loss-token counts) as in :func:`lint`."""
    if tokenizer is None:
        raise ValueError("hist needs a tokenizer")
    _, hist_d, _ = _analyze(inputs, tokenizer, pattern, False, True, seq_len, 0, None, field, doc_sep, threads,
                            max_record_bytes, cut_overlong, 0, 0, 0, 0, svg, progress,
                            _chat(format, chat_template, loss_on, messages_field))
    return hist_d


def build(inputs, out, *, tokenizer, seq_len, pack="concat", over_long="truncate", bfd_window=0, val_fraction=0.0,
          seed=0, shuffle=True, shard_tokens=0, zstd=0, frame_rows=0, field=None, doc_sep="file", part=None,
          threads=0, batch_bytes=0, force=False, pattern=None, progress=None, checkpoint_seconds=None, format=None,
          chat_template=None, loss_on=None, messages_field=None):
    """`mkshards build` in-process (ds_build): the same shards and manifest, byte for byte, as the CLI with the
    same options (``pack`` = ``--pack``, ``over_long`` = ``--over-long``, ``zstd`` = ``--zstd LEVEL``, ``part`` =
    ``--part K/N`` as "K/N" or (K, N), ``shuffle=False`` = ``--no-shuffle``; 0 means the CLI's default).

    ``tokenizer``: a name or path (recorded in the manifest as given, like ``--tokenizer``) or an Encoding.
    ``progress(event)`` is called with dicts (event "progress" after every batch: records, bytes_in, tokens,
    est_bytes, seconds, last; "resume", "rebuild", "checkpoint_failed"); returning True cancels. Ctrl-C cancels
    at the next batch boundary and raises KeyboardInterrupt; an interrupted or canceled build keeps its
    checkpoint (written every ``checkpoint_seconds``, 0.5 by default; 0: after every batch that wrote a shard),
    and the same call later continues from it. Returns a dict: up_to_date, resumed, n_checked,
    n_shards, seconds and the written ``manifest`` (its "accounting" is the build's report).

    Fine-tuning records (docs/chat.md) as in :func:`lint`: ``format``, ``chat_template``, ``loss_on`` (default:
    assistant for chat, completion for prompt-completion), ``messages_field``; the shards then carry the loss
    mask (version 2), ``over_long="drop-turns"`` drops the oldest turns, and the datasets give ``labels`` -100
    where the mask is off."""
    if tokenizer is None:
        raise ValueError("build needs a tokenizer")
    if isinstance(tokenizer, Encoding):
        tok, spec = tokenizer._core, tokenizer._spec
    else:
        spec = os.fspath(tokenizer)
        tok = _core.Tokenizer(spec, pattern)
    k, n = (1, 1) if part is None else _part(part)
    chat = _chat(format, chat_template, loss_on, messages_field)
    src = _source(inputs, field, chat)
    if src is not None and (k, n) != (1, 1):
        raise ValueError("part: a Python source cannot be split into parts (its records are not numbered "
                         "ahead); build from files, or split the source yourself")
    if src is not None and checkpoint_seconds is not None:
        raise ValueError("checkpoint_seconds: a build from a Python source is not checkpointed and cannot be "
                         "resumed (the source cannot be replayed); an interrupted build starts over")
    # numbers as given: C checks each against the range of the CLI option (ValueError naming it); seed is any
    # 64-bit unsigned value, as --seed
    res = _core.build(_inputs(inputs) if src is None else src, os.fspath(out), tok, spec, seq_len=seq_len, pack=pack,
                      over_long=over_long, bfd_window=_zero(bfd_window),
                      val_fraction=float(val_fraction), seed=seed, shuffle=bool(shuffle),
                      shard_tokens=_zero(shard_tokens), zstd_level=_zero(zstd), frame_rows=_zero(frame_rows),
                      field=field, doc_sep=doc_sep, part_k=k, part_n=n, threads=_zero(threads),
                      batch_bytes=_zero(batch_bytes), force=bool(force), callback=progress,
                      checkpoint_seconds=None if checkpoint_seconds is None else float(checkpoint_seconds),
                      **_chat(format, chat_template, loss_on, messages_field))
    with open(os.path.join(os.fspath(out), "manifest.json")) as f:
        res["manifest"] = json.load(f)
    return res
