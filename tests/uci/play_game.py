"""Drives `lakefish engine` through python-chess's UCI client for one whole game.

Usage: play_game.py ENGINE_CMD... -- [--nodes N] [--max-plies N]
Prints one JSON object: the moves, the result, the info scores seen, the options offered.
Exits non-zero (with the reason) on anything a UCI client would reject.
"""
import json
import sys

import chess
import chess.engine


def main():
    sep = sys.argv.index("--")
    cmd, rest = sys.argv[1:sep], sys.argv[sep + 1 :]
    opts = dict(zip(rest[0::2], rest[1::2]))
    nodes = int(opts.get("--nodes", "3000"))
    max_plies = int(opts.get("--max-plies", "400"))

    engine = chess.engine.SimpleEngine.popen_uci(cmd, timeout=30)
    offered = sorted(engine.options.keys())
    engine.configure({"Hash": 8})
    board = chess.Board()
    scores = []
    depths = []
    while not board.is_game_over(claim_draw=True) and board.ply() < max_plies:
        result = engine.play(board, chess.engine.Limit(nodes=nodes), info=chess.engine.INFO_ALL)
        if result.move is None or result.move not in board.legal_moves:
            raise SystemExit(f"illegal or missing move {result.move} at ply {board.ply()}")
        score = result.info.get("score")
        if score is not None:
            scores.append(str(score.white()))
        depths.append(result.info.get("depth", 0))
        board.push(result.move)
    # An analysis call with a time limit and a position with history.
    info = engine.analyse(board if not board.is_game_over() else chess.Board(),
                          chess.engine.Limit(time=0.2))
    engine.quit()
    print(json.dumps({
        "moves": [m.uci() for m in board.move_stack],
        "result": board.result(claim_draw=True),
        "outcome": str(board.outcome(claim_draw=True)),
        "scores": scores,
        "max_depth": max(depths) if depths else 0,
        "options": offered,
        "analysis_depth": info.get("depth", 0),
    }))


if __name__ == "__main__":
    main()
