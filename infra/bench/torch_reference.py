"""The plain PyTorch training loop `lakefish bench train` compares its trainer with.

Same model (EmbeddingBag feature transformer shared by both perspectives, side to move
first, clipped ReLU, dense layers), same ELMO loss, Adam, weight clipping, same batches
(read from the file the bench wrote), same torch build and thread count. Prints one JSON
line: {"positions_per_s": ..., "steps": ..., "threads": ..., "torch": ...}.

usage: torch_reference.py BATCHES_FILE --arch 256x2-32-32 --inputs 768 --steps 30 --threads 2
                          [--device cpu|cuda]
"""

import argparse
import json
import struct
import time

import numpy as np
import torch


def read_batches(path):
    """Batches as the bench writes them: per batch three little-endian u64 counts (rows,
    stm indices, nstm indices), then stm indices, stm offsets, nstm indices, nstm offsets
    (i32, as the trainer gives them to embedding_bag) and score, result (f32)."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        rows, n_stm, n_nstm = struct.unpack_from("<QQQ", data, at)
        at += 24

        def take(count, dtype):
            nonlocal at
            a = np.frombuffer(data, dtype=dtype, count=count, offset=at)
            at += a.nbytes
            return torch.from_numpy(a.copy())

        stm_i = take(n_stm, "<i4")
        stm_o = take(rows, "<i4")
        nstm_i = take(n_nstm, "<i4")
        nstm_o = take(rows, "<i4")
        score = take(rows, "<f4").unsqueeze(1)
        result = take(rows, "<f4").unsqueeze(1)
        out.append((stm_i, stm_o, nstm_i, nstm_o, score, result))
    return out


class Net(torch.nn.Module):
    def __init__(self, inputs, l1, hidden):
        super().__init__()
        self.ft = torch.nn.EmbeddingBag(inputs, l1, mode="sum")
        self.ft_bias = torch.nn.Parameter(torch.zeros(l1))
        widths = [2 * l1] + hidden + [1]
        self.dense = torch.nn.ModuleList(
            torch.nn.Linear(a, b) for a, b in zip(widths, widths[1:])
        )

    def forward(self, stm_i, stm_o, nstm_i, nstm_o):
        stm = self.ft(stm_i, stm_o) + self.ft_bias
        nstm = self.ft(nstm_i, nstm_o) + self.ft_bias
        x = torch.cat([stm, nstm], dim=1).clamp(0.0, 1.0)
        for i, layer in enumerate(self.dense):
            x = layer(x)
            if i + 1 < len(self.dense):
                x = x.clamp(0.0, 1.0)
        return x


def elmo_loss(pred, score, result, lam=1.0, scale=361.0):
    q = pred / scale
    t = lam * torch.sigmoid(score / scale) + (1.0 - lam) * result
    eps = 1e-12
    p = torch.sigmoid(q)
    ce = -(t * p.clamp(eps, 1.0).log() + (1 - t) * (1 - p).clamp(eps, 1.0).log())
    h = -(t * t.clamp(eps, 1.0).log() + (1 - t) * (1 - t).clamp(eps, 1.0).log())
    return (ce - h).mean()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("batches")
    ap.add_argument("--arch", default="256x2-32-32")
    ap.add_argument("--inputs", type=int, default=768)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    first, *rest = a.arch.split("-")
    l1 = int(first.removesuffix("x2"))
    hidden = [int(h) for h in rest]
    device = torch.device(a.device)
    batches = [tuple(t.to(device) for t in b) for b in read_batches(a.batches)]
    net = Net(a.inputs, l1, hidden).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    out_max = 127.0 * 127.0 / 9600.0
    hid_max = 127.0 / 64.0

    def step(b):
        stm_i, stm_o, nstm_i, nstm_o, score, result = b
        opt.zero_grad()
        loss = elmo_loss(net(stm_i, stm_o, nstm_i, nstm_o) * 600.0, score, result)
        loss.backward()
        opt.step()
        with torch.no_grad():
            for i, layer in enumerate(net.dense):
                m = out_max if i + 1 == len(net.dense) else hid_max
                layer.weight.clamp_(-m, m)
        return loss

    def sync():
        # CUDA runs asynchronously: wait for the queued steps before reading the clock.
        if device.type == "cuda":
            torch.cuda.synchronize()

    step(batches[0])  # warm-up
    sync()
    start = time.perf_counter()
    for i in range(a.steps):
        step(batches[i % len(batches)])
    sync()
    elapsed = time.perf_counter() - start
    rows = sum(len(batches[i % len(batches)][4]) for i in range(a.steps))
    print(
        json.dumps(
            {
                "positions_per_s": rows / elapsed,
                "steps": a.steps,
                "threads": torch.get_num_threads(),
                "device": str(device),
                "torch": torch.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
