#!/usr/bin/env python3
"""Step by step against bullet: the same rows and the same start in lakefish and in bullet.

    # rows of a shuffle's chunks (`lakefish chunk SH I --limit N` lines) as bullet's
    # ChessBoard records, in the order given:
    for i in 5 0 1 4 2 3 6; do lakefish chunk SH $i --limit 100000000; done \
      | .venv/bin/python infra/bench/bullet_step.py records > rows.bf
    # a lakefish checkpoint of a SCReLU transformer straight into the output (bullet's
    # 1_simple, or 3_input_buckets with its factoriser and output buckets) as bullet's weights.bin:
    .venv/bin/python infra/bench/bullet_step.py weights STEP.ot init.bin
    # how far apart two nets stepped from the same start (lakefish's and bullet's after):
    .venv/bin/python infra/bench/bullet_step.py compare START.ot LAKEFISH.ot BULLET_weights.bin

bullet's example tests/bullet/lakefish_check.rs reads such records in order with BF=rows.bf
and starts from INIT=init.bin (docs/BENCHMARKS.md, "Step by step against bullet").
A ChessBoard is what bulletformat 1.8's `from_raw` makes: the board seen from the side to
move (ranks flipped and colours swapped when Black is to move), score and result the side
to move's. lakefish's chunk rows carry the side to move's score and result already.
"""
import re
import struct
import sys
import zipfile

PIECES = "pnbrqk"
RESULTS = {"-1": 0.0, "0": 0.5, "1": 1.0, "-": 0.5}


def board_record(fen, score, result):
    parts = fen.split()
    if len(parts) < 2 or parts[1] not in ("w", "b"):
        raise ValueError(f"not a FEN: {fen!r}")
    black = parts[1] == "b"
    bbs = [0] * 8  # ours, theirs, pawn .. king
    for rank, row in zip(range(7, -1, -1), parts[0].split("/")):
        f = 0
        for ch in row:
            if ch.isdigit():
                f += int(ch)
                continue
            sq = rank * 8 + f
            if black:
                sq ^= 56
            mine = ch.isupper() != black
            bbs[0 if mine else 1] |= 1 << sq
            bbs[2 + PIECES.index(ch.lower())] |= 1 << sq
            f += 1
    occ = bbs[0] | bbs[1]
    pcs = bytearray(16)
    idx, rest = 0, occ
    while rest:
        bit = rest & -rest
        rest ^= bit
        piece = next(i for i in range(6) if bbs[2 + i] & bit)
        pcs[idx // 2] |= ((8 if bit & bbs[1] else 0) | piece) << (4 * (idx & 1))
        idx += 1
    ksq = (bbs[0] & bbs[7]).bit_length() - 1
    opp_ksq = ((bbs[1] & bbs[7]).bit_length() - 1) ^ 56
    return struct.pack("<Q16shBBB3s", occ, bytes(pcs), score, int(2 * result), ksq, opp_ksq, bytes(3))


def records():
    out, n = sys.stdout.buffer, 0
    for line_no, line in enumerate(sys.stdin, 1):
        cols = line.rstrip("\n").split("\t")
        if len(cols) < 3:
            sys.exit(f"line {line_no}: want FEN, score and result separated by tabs")
        if cols[1] == "-":
            continue  # no score: bullet's filter drops such rows too
        out.write(board_record(cols[0], int(cols[1]), RESULTS[cols[2]]))
        n += 1
    print(f"{n} records", file=sys.stderr)


# bullet's tensor names and lakefish's (the factoriser only in bucketed nets).
NAMES = [("l0w", "ft.weight"), ("l0f", "ft.factoriser"), ("l0b", "ft.bias"), ("l1w", "out.weight"), ("l1b", "out.bias")]


def to_bullet(w):
    """lakefish's tensors in bullet's layouts: the output weight [buckets, 2W] row-major is
    bullet's (buckets x 2W) column-major, so it is transposed; the rest is as stored."""
    out = {}
    for theirs, ours in NAMES:
        if ours not in w:
            continue
        v = w[ours]
        if ours == "out.weight":
            buckets = w["out.bias"].size
            v = v.reshape(buckets, -1).T.reshape(-1)
        out[theirs] = v
    return out


def read_checkpoint(path):
    """A lakefish checkpoint's tensors (a TorchScript archive: data/N in parameter order)."""
    import numpy as np

    z = zipfile.ZipFile(path)
    code = z.read("archive/code/__torch__.py").decode()
    names = [n.strip().strip('"') for n in re.search(r"__parameters__ = \[(.*?)\]", code).group(1).split(",") if n.strip()]
    return {n.replace("|", "."): np.frombuffer(z.read(f"archive/data/{i}"), dtype="<f4")
            for i, n in enumerate(names) if n not in ("position", "netspec")}


def read_weights(path):
    """bullet's weights.bin: per tensor its id, a newline, a u64 count and the f32 values."""
    import numpy as np

    b, o, out = open(path, "rb").read(), 0, {}
    while o < len(b):
        nl = b.index(b"\n", o)
        name = b[o:nl].decode()
        (n,) = struct.unpack_from("<Q", b, nl + 1)
        out[name] = np.frombuffer(b, dtype="<f4", count=n, offset=nl + 9)
        o = nl + 9 + 4 * n
    w = {ours: out[theirs] for theirs, ours in NAMES if theirs in out}
    buckets = w["out.bias"].size
    w["out.weight"] = w["out.weight"].reshape(-1, buckets).T.reshape(-1)
    return w


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "records":
        return records()
    if len(sys.argv) == 4 and sys.argv[1] == "weights":
        w = to_bullet(read_checkpoint(sys.argv[2]))
        with open(sys.argv[3], "wb") as f:
            for theirs, v in w.items():
                f.write(theirs.encode() + b"\n" + struct.pack("<Q", v.size) + v.astype("<f4").tobytes())
        return
    if len(sys.argv) == 5 and sys.argv[1] == "compare":
        import numpy as np

        start, ours, theirs = read_checkpoint(sys.argv[2]), read_checkpoint(sys.argv[3]), read_weights(sys.argv[4])
        for _, name in NAMES:
            if name not in start:
                continue
            a, b = ours[name] - start[name], theirs[name] - start[name]
            print(f"{name:10} mean |step| lakefish {np.abs(a).mean():.4e} bullet {np.abs(b).mean():.4e}  "
                  f"max |lakefish - bullet| {np.abs(a - b).max():.3e} ({np.abs(a - b).max() / max(np.abs(b).max(), 1e-30):.1e} of the largest step)")
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
