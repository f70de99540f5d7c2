"""An evaluator of nets in a saved layout that shares no code with lakefish.

    layout_eval.py LAYOUT.toml NETSPEC.(toml|json) NET.bin < fens > evals

Reads only the layout document, the net's description and the file; prints, for each FEN on
standard input, the net's integer evaluation for the side to move, one per line. Inputs are
bullet's: `Chess768` (the perspective's men first, then the other side's; piece type x
square; squares seen from the perspective, ranks flipped for Black) and, for king buckets,
`ChessBucketsMirrored` (the perspective's king on files e-h mirrors files). The arithmetic is
lakefish's description of a quantized net: integer accumulators, the transformer's activation
at its integer scale, the first layer's sum exact, later layers in float64, the output times
the evaluation scale rounded half away from zero.
"""

import json
import math
import sys
import tomllib

import chess
import numpy as np

DTYPES = {"i8": "<i1", "i16": "<i2", "i32": "<i4", "f32": "<f4"}


def load_spec(path):
    text = open(path).read()
    return json.loads(text) if text.lstrip().startswith("{") else tomllib.loads(text)


def shapes(spec):
    """Each tensor's matrix (M outputs, N inputs), by name."""
    inputs = spec["inputs"]
    buckets = max(inputs["layout"]) + 1 if inputs["family"] == "king_buckets" else 1
    width = spec["transformer"]["width"]
    ob = spec.get("output_buckets", {}).get("count", 1)
    out = {"ft.weight": (width, 768 * buckets), "ft.bias": (width, 1)}
    fan_in = 2 * (width // 2 if spec["transformer"]["activation"] == "pairwise_crelu" else width)
    for i, layer in enumerate(spec.get("layers", [])):
        rows = layer["width"] * (ob if layer.get("per_bucket") else 1)
        out[f"l{i + 1}.weight"] = (rows, fan_in)
        out[f"l{i + 1}.bias"] = (rows, 1)
        fan_in = layer["width"]
    out["out.weight"] = (ob, fan_in)
    out["out.bias"] = (ob, 1)
    return out


def read_net(layout, spec, data):
    """The tensors as float64 arrays in the net's own orientation (M x N), with factors."""
    for t in layout["tensors"]:
        if t.get("merge") not in (None, ["ft.factoriser"]):
            sys.exit(f"{t['id']}: only ft.factoriser merges")
    if "stacks" in layout or any("pad_inputs" in t for t in layout["tensors"]) or any(
        "description" in h for h in layout.get("header", [])
    ):
        sys.exit("this evaluator reads bullet-style layouts: no stacks, pad_inputs or description")
    header = b"".join(
        h["u32"].to_bytes(4, "little") if "u32" in h else h["text"].encode()
        for h in layout.get("header", [])
    )
    assert data[: len(header)] == header, "header differs"
    at = len(header)
    dims = shapes(spec)
    tensors = {}
    for t in layout["tensors"]:
        m, n = dims[t["tensor"]]
        dt = np.dtype(DTYPES[t["dtype"]])
        values = np.frombuffer(data, dtype=dt, count=m * n, offset=at)
        at += m * n * dt.itemsize
        # The file holds M x N column-major, or with `transpose` its transpose.
        matrix = values.reshape(m, n) if t.get("transpose") else values.reshape(n, m).T
        tensors[t["tensor"]] = (matrix.astype(np.float64 if t["dtype"] == "f32" else np.int64), t["factor"])
    pad = layout.get("padding")
    if pad:
        rest = (-at) % pad["multiple"]
        fill = (pad.get("bytes") or "\0").encode()
        assert data[at:] == bytes(fill[i % len(fill)] for i in range(rest)), "padding differs"
    else:
        assert at == len(data), "trailing bytes"
    return tensors


def features(board, perspective, spec):
    inputs = spec["inputs"]
    flip_rank = 56 if perspective == chess.BLACK else 0
    bucket_base, flip_file = 0, 0
    if inputs["family"] == "king_buckets":
        ksq = board.king(perspective) ^ flip_rank
        if inputs.get("mirror"):
            flip_file = 7 if ksq % 8 > 3 else 0
            file = ksq % 8 if ksq % 8 < 4 else 7 - ksq % 8
            bucket = inputs["layout"][(ksq // 8) * 4 + file]
        else:
            bucket = inputs["layout"][ksq]
        bucket_base = 768 * bucket
    out = []
    for sq, piece in board.piece_map().items():
        them = 0 if piece.color == perspective else 1
        out.append(bucket_base + 384 * them + 64 * (piece.piece_type - 1) + ((sq ^ flip_rank) ^ flip_file))
    return out


def round_half_away(y):
    a = abs(y)
    r = math.floor(a)
    if a - r >= 0.5:
        r += 1
    return int(math.copysign(r, y)) if r else 0


def evaluate(fen, spec, t):
    board = chess.Board(fen)
    w, wf = t["ft.weight"]
    b, _ = t["ft.bias"]
    qa = int(wf)
    accs = []
    for p in (board.turn, not board.turn):
        acc = b[:, 0] + w[:, features(board, p, spec)].sum(axis=1)
        # 16-bit lanes wrap, as the engine's (and Stockfish's) accumulators do.
        accs.append((acc + 32768) % 65536 - 32768)
    act = spec["transformer"]["activation"]
    clamp = [np.clip(a, 0, qa) for a in accs]
    if act == "crelu":
        x, scale = np.concatenate(clamp), qa
    elif act == "screlu":
        x, scale = np.concatenate([c * c for c in clamp]), qa * qa
    else:
        h = len(clamp[0]) // 2
        x, scale = np.concatenate([c[:h] * c[h:] for c in clamp]), qa * qa
    ob = spec.get("output_buckets", {}).get("count", 1)
    men = min(max(len(board.piece_map()), 2), 32)
    bucket = (men - 2) // math.ceil(32 / ob) if ob > 1 else 0
    names = [f"l{i + 1}" for i in range(len(spec.get("layers", [])))] + ["out"]
    values = None
    for i, name in enumerate(names):
        (wm, wfac), (bm, bfac) = t[name + ".weight"], t[name + ".bias"]
        per_bucket = name == "out" and ob > 1 or name != "out" and spec["layers"][i].get("per_bucket")
        width = 1 if name == "out" else spec["layers"][i]["width"]
        rows = range(bucket * width, bucket * width + width) if per_bucket else range(width)
        out = []
        for o in rows:
            bias = float(bm[o, 0]) / bfac
            if i == 0 and wm.dtype == np.int64:
                s = int(np.dot(x, wm[o]))
                out.append(s / (scale * wfac) + bias)
            elif i == 0:
                out.append(float(np.dot(x / scale, wm[o])) / wfac + bias)
            else:
                out.append(float(np.dot(values, wm[o])) / wfac + bias)
        if name != "out":
            a = spec["layers"][i]["activation"]
            out = [min(max(v, 0.0), 1.0) ** (2 if a == "screlu" else 1) for v in out]
        values = np.array(out)
    return round_half_away(values[0] * spec["quantization"]["eval_scale"])


def main():
    layout = tomllib.loads(open(sys.argv[1]).read())
    spec = load_spec(sys.argv[2])
    tensors = read_net(layout, spec, open(sys.argv[3], "rb").read())
    for line in sys.stdin:
        if line.strip():
            print(evaluate(line.strip(), spec, tensors))


if __name__ == "__main__":
    main()
