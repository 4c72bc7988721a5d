"""What the PyTorch baselines share (tools/bench/nanogpt_torch.py: GPT-2, tools/bench/llama_torch.py:
transformers' Llama): the shard-set reader, the device set-up, the optimizer, the batches, the timed loop
and the JSON line's common fields, so that both baselines measure the same way and a change to how they
measure is made once. Each script keeps its model, its command line and its own JSON fields.

torch and numpy are passed in (imported by the caller, which reports a failed import as its JSON line)."""
import glob
import importlib
import json
import os
import statistics
import sys
import time


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def open_reader(data_dir, seq_len):
    """Returns (rows, description): rows indexable, each a token sequence or (tokens, loss_mask), or None
    for random tokens. Looks in tools/python for a numpy shard reader: a module with open_shards(dir) /
    ShardSet(dir) / open_set(dir) / open(dir) whose result has row(i) + num_rows(split) (mkshards_reader's
    ShardSet), .rows (an array [N, L]) or is indexable as rows. Anything else: random tokens."""
    if not data_dir:
        return None, "random: no --data"
    here = os.path.dirname(os.path.abspath(__file__))
    pydir = os.path.normpath(os.path.join(here, "..", "python"))
    if not os.path.isdir(pydir):
        return None, "random: no tools/python"
    sys.path.insert(0, pydir)
    tried = []
    for path in sorted(glob.glob(os.path.join(pydir, "*.py"))):
        mod_name = os.path.splitext(os.path.basename(path))[0]
        if mod_name.startswith("_") or "example" in mod_name or "torch" in mod_name:
            continue
        try:
            mod = importlib.import_module(mod_name)
        except Exception as e:  # a reader that needs something missing: note and go on
            tried.append(f"{mod_name}: {type(e).__name__}")
            continue
        for fn_name in ("open_shards", "ShardSet", "open_set", "open"):
            fn = getattr(mod, fn_name, None)
            if not callable(fn):
                continue
            try:
                obj = fn(data_dir)
            except Exception as e:
                tried.append(f"{mod_name}.{fn_name}: {type(e).__name__}: {e}")
                continue
            if callable(getattr(obj, "row", None)) and callable(getattr(obj, "num_rows", None)):
                # mkshards_reader.ShardSet: row(i) -> {"tokens", "loss_mask", ...}
                class _Rows:
                    def __init__(self, ds):
                        self.ds, self.n = ds, ds.num_rows("train")

                    def __len__(self):
                        return self.n

                    def __getitem__(self, i):
                        # (tokens, loss mask, positions, document ids): the last two are the document
                        # boundaries llmtrain --doc-mask reads (positions restart, segments differ)
                        r = self.ds.row(i, split="train")
                        return (r["tokens"], r.get("loss_mask"), r.get("pos_ids"), r.get("doc_ids"))

                wrapped = _Rows(obj)
                if len(wrapped) == 0:
                    tried.append(f"{mod_name}.{fn_name}: no train rows")
                    continue
                return wrapped, f"shards: {data_dir} via tools/python/{mod_name}.{fn_name} ({len(wrapped)} rows)"
            rows = getattr(obj, "rows", None)
            if callable(rows):
                try:
                    rows = rows()
                except Exception:
                    rows = None
            if rows is None:
                rows = obj
            try:
                n = len(rows)
                first = rows[0]
                if len(first) < seq_len + 1 and len(first) < seq_len:
                    tried.append(f"{mod_name}.{fn_name}: rows of {len(first)} < seq-len {seq_len}")
                    continue
            except Exception as e:
                tried.append(f"{mod_name}.{fn_name}: rows not indexable ({type(e).__name__})")
                continue
            return rows, f"shards: {data_dir} via tools/python/{mod_name}.{fn_name} ({n} rows)"
    return None, "random: no usable reader in tools/python" + (f" ({'; '.join(tried)})" if tried else "")


def device(torch, name, seed, impl):
    """The torch device, seeded, TF32 matmuls on CUDA; None (after printing the error as the JSON line)
    when CUDA is asked for and torch sees none."""
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"impl": impl, "error": "no CUDA device visible to torch"}), flush=True)
        return None
    torch.manual_seed(seed)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return dev


def adamw(torch, model, lr, dev):
    """AdamW as llmtrain's: betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices and embeddings (dim >= 2),
    none on vectors; fused on the GPU."""
    decay = [p for _, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for _, p in model.named_parameters() if p.dim() < 2]
    kw = {"lr": lr, "betas": (0.9, 0.95), "eps": 1e-8}
    if dev.type == "cuda":
        kw["fused"] = True
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             **kw)


RANDOM_DOCS = "documents of random lengths, uniform in 1..T/4 tokens, drawn per row (seeded)"


def random_docs(np, rng, T):
    """(positions, document ids) of one row of T tokens cut into documents of random lengths (RANDOM_DOCS):
    positions restart at 0 where a document starts, ids count the documents from 0."""
    pos = np.empty(T, dtype=np.int64)
    doc = np.empty(T, dtype=np.int64)
    j = d = 0
    while j < T:
        n = min(int(rng.integers(1, max(1, T // 4) + 1)), T - j)
        pos[j:j + n] = np.arange(n)
        doc[j:j + n] = d
        j, d = j + n, d + 1
    return pos, doc


def doc_ids_from_pos(np, pos):
    """llmtrain's rule (train/loader.c fill_one): a new document where the position is 0, except at the first
    token. The reader's doc_ids make the same partition; deriving it here keeps one definition for both."""
    pos = np.asarray(pos)
    mark = pos == 0
    mark[0] = False
    return np.cumsum(mark, dtype=np.int64)


def batches(torch, np, rows, B, T, V, dev, ignore, doc_mask=False, seed=0):
    """A next_batch() -> (inputs, targets), each (B, T) int64 on dev: random tokens below V when rows is None,
    else the next B rows in order (wrapping), targets shifted by one; a target beyond the row or where the
    row's loss mask is 0 is `ignore` (the loss's ignore index), a short row is padded with token 0.

    doc_mask: next_batch() -> (inputs, targets, positions, document ids), the last two (B, T) int64 as
    llmtrain --doc-mask builds them: from the shard rows' positions (restarting at each document and at the
    padding), else from random documents (random_docs). The inputs and targets are the ones above."""
    cursor = [0]
    rng = np.random.default_rng(seed)

    def next_batch():
        ps, ds = [], []
        if rows is None:
            x = torch.randint(0, V, (B, T + 1), dtype=torch.int64)
            xb, yb = x[:, :-1], x[:, 1:].clone()
            if doc_mask:
                for _ in range(B):
                    p, d = random_docs(np, rng, T)
                    ps.append(p)
                    ds.append(d)
        else:
            xs, ys = [], []
            for i in range(B):
                r = rows[(cursor[0] + i) % len(rows)]
                tok, mask = (r[0], r[1]) if isinstance(r, tuple) else (r, None)
                tok = np.asarray(tok[: T + 1], dtype=np.int64)
                y = np.full(T, ignore, dtype=np.int64)  # a target beyond the row carries no loss (as llmtrain)
                y[: len(tok) - 1] = tok[1:T + 1]
                if mask is not None:  # padding targets carry no loss
                    m = np.asarray(mask[1:T + 1])
                    y[: len(m)][m == 0] = ignore
                xs.append(np.pad(tok[:T], (0, T - len(tok[:T]))))
                ys.append(y)
                if doc_mask:
                    pos = r[2] if isinstance(r, tuple) and len(r) > 2 and r[2] is not None else None
                    if pos is None:  # rows without boundaries: one document each
                        p = np.arange(T, dtype=np.int64)
                    else:
                        p = np.zeros(T, dtype=np.int64)
                        n = min(T, len(pos))
                        p[:n] = np.asarray(pos[:n], dtype=np.int64)
                        # a short row's padding (never in mkshards rows) is one more document
                        p[n:] = np.arange(T - n)
                    ps.append(p)
                    ds.append(doc_ids_from_pos(np, p))
            cursor[0] += B
            xb, yb = torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))
        out = [xb, yb]
        if doc_mask:
            out += [torch.from_numpy(np.stack(ps)), torch.from_numpy(np.stack(ds))]
        if dev.type == "cuda":
            out = [t.pin_memory().to(dev, non_blocking=True) for t in out]
        return tuple(out)

    return next_batch


def timed(torch, dev, one_step, warmup, steps, cuda_events):
    """warmup untimed steps (compile happens there), then `steps` timed ones; one_step() returns the loss.
    Returns (seconds per step, losses, warm-up seconds). A step's time: CUDA events around it when
    cuda_events and on the GPU, else the wall clock until its loss is read (a sync). The device's peak
    memory counters restart after the warm-up."""
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t0 = time.perf_counter()
    for _ in range(warmup):
        one_step()
    sync()
    warm_s = time.perf_counter() - t0
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for _ in range(steps):
        if cuda_events and dev.type == "cuda":
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            loss = one_step()
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) / 1e3)
            losses.append(float(loss.item()))
        else:
            t = time.perf_counter()
            loss = one_step()
            losses.append(float(loss.item()))
            times.append(time.perf_counter() - t)
    return times, losses, warm_s


def flops_per_token(n_matmul_params, n_layer, seq_len, d_model):
    """6 N + 6 L T d (PaLM appendix B): N the parameters that are matmul weights (an embedding used only as a
    lookup left out), attention's QK^T and PV counted at full T x T."""
    return 6 * n_matmul_params + 6 * n_layer * seq_len * d_model


def result(torch, head, dev, B, T, times, losses, warm_s, data_desc, extra=None):
    """The JSON line's fields: head (the script's own: impl, shape, ...), then what every baseline reports:
    device, step time median, tokens/s, extra (fields computed from those: extra(tokens_per_s) -> dict),
    peak device memory, warm-up time, first and last loss, the data used."""
    med = statistics.median(times)
    cuda = dev.type == "cuda"
    out = dict(head)
    out.update({"device": str(dev), "gpu": torch.cuda.get_device_name(dev) if cuda else "",
                "step_ms_median": med * 1e3, "tokens_per_s": B * T / med})
    if extra:
        out.update(extra(out["tokens_per_s"]))
    out.update({
        "peak_mem_bytes": int(torch.cuda.max_memory_allocated(dev)) if cuda else 0,
        "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(dev)) if cuda else 0,
        "warmup_s": warm_s, "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None, "data": data_desc,
    })
    return out

