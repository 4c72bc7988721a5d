"""PyTorch Dataset over a mkshards shard set (example; needs torch + numpy).

    ds = MkshardsDataset("shards/", split="train")
    dl = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True, num_workers=4)
    for b in dl:
        logits = model(b["input_ids"], position_ids=b["position_ids"], doc_ids=b["doc_ids"])
        loss = F.cross_entropy(logits.flatten(0, 1), b["labels"].flatten(), ignore_index=-100)

Each item is one row of seq_len tokens. labels[i] = tokens[i+1], set to -100
(ignored) where the next position is padding or starts another document
segment, so no loss crosses a document boundary. Rows are already shuffled
within each shard by `mkshards build --seed`; DataLoader(shuffle=True) adds a
global shuffle. Memory maps are opened lazily per worker process.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mkshards_reader import ShardSet  # noqa: E402


class MkshardsDataset(torch.utils.data.Dataset):
    def __init__(self, directory, split="train"):
        self.directory, self.split = directory, split
        self._set = None
        self._len = ShardSet(directory).num_rows(split)

    def __len__(self):
        return self._len

    def __getitem__(self, i):
        if self._set is None:  # one set of memory maps per worker
            self._set = ShardSet(self.directory)
        r = self._set.row(int(i), self.split)
        tokens = torch.from_numpy(r["tokens"].astype(np.int64))
        doc = torch.from_numpy(r["doc_ids"].astype(np.int64))
        mask = torch.from_numpy(r["loss_mask"].astype(np.bool_))
        labels = torch.full_like(tokens, -100)
        same = (doc[1:] == doc[:-1]) & mask[1:]
        labels[:-1] = torch.where(same, tokens[1:], torch.full_like(tokens[1:], -100))
        return {"input_ids": tokens, "labels": labels, "position_ids": torch.from_numpy(r["pos_ids"].astype(np.int64)),
                "doc_ids": doc, "loss_mask": mask}


if __name__ == "__main__":
    ds = MkshardsDataset(sys.argv[1])
    b = next(iter(torch.utils.data.DataLoader(ds, batch_size=2)))
    print({k: tuple(v.shape) for k, v in b.items()})
