#!/usr/bin/env python3
"""How well evaluations predict a shuffle's labels: the training loss (ELMO cross-entropy
minus the target's entropy, as `lakefish train` reports it) of each evaluation the engine
prints with UCI `eval`, on rows of a shuffle's last (held-out) chunk, for λ = 1 (the search
score alone) and a blended λ. A net that fits its target but not the score shows here.

    .venv/bin/python infra/bench/eval_loss.py LAKE SHUFFLE [--rows 3000] [--lambda 0.7] NET...

NET is anything `lakefish engine --net` takes: classical, nn-....nnue, a path.
"""
import argparse
import json
import math
import random
import re
import subprocess

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("lake")
parser.add_argument("shuffle")
parser.add_argument("nets", nargs="+")
parser.add_argument("--rows", type=int, default=3000)
parser.add_argument("--lambda", dest="lam", type=float, default=0.7)
parser.add_argument("--scale", type=float, default=361.0)
parser.add_argument("--bin", default="target/release/lakefish")
args = parser.parse_args()

manifest = f"{args.lake}/shuffled/{args.shuffle}/_manifest.json"
try:
    with open(manifest) as f:
        last = len(json.load(f)["chunks"]) - 1
except FileNotFoundError:
    raise SystemExit(f"no committed shuffle at {manifest}")
# Chunks hold packed boards, not FEN text: `lakefish chunk` prints them as FENs.
printed = subprocess.run(
    [args.bin, "--lake", args.lake, "chunk", args.shuffle, str(last), "--limit", "100000000", "--json"],
    capture_output=True, text=True, check=True,
).stdout
usable = [r for r in map(json.loads, printed.splitlines())
          if r["score"] is not None and r["result"] is not None]
rows = [(r["fen"], r["score"], r["result"])
        for r in random.Random(7).sample(usable, min(args.rows, len(usable)))]


def evaluations(net):
    script = "uci\n" + "".join(f"position fen {fen}\neval\n" for fen, _, _ in rows) + "quit\n"
    out = subprocess.run(
        [args.bin, "--lake", args.lake, "engine", "--net", net],
        input=script, capture_output=True, text=True, check=True,
    ).stdout
    values = [int(v) for v in re.findall(r"\((-?\d+) internal\)", out)]
    if len(values) != len(rows):
        raise SystemExit(f"{net}: {len(values)} evaluations for {len(rows)} positions")
    return values


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x / args.scale))


def loss(p, t):
    e = 1e-12
    p, tc = min(max(p, e), 1 - e), min(max(t, e), 1 - e)
    return -(t * math.log(p) + (1 - t) * math.log(1 - p)) + (t * math.log(tc) + (1 - t) * math.log(1 - tc))


print(f"{len(rows)} rows of chunk {last} of {args.shuffle}")
for net in args.nets:
    values = evaluations(net)
    for lam in (1.0, args.lam):
        total = sum(
            loss(sigmoid(v), lam * sigmoid(score) + (1 - lam) * (result + 1) / 2)
            for v, (_, score, result) in zip(values, rows)
        )
        print(f"{net}\tλ={lam}\tloss {total / len(rows):.5f}")
