#!/usr/bin/env python3
"""A UCI engine that misbehaves on purpose, for lakefish's match-integrity tests.

usage: faulty_uci.py MODE [AFTER [ENGINE...]]

Until the AFTER-th `go` (counted from 0 over the whole process) every line goes to ENGINE, a
real UCI engine, and its answers come back; then, at that `go`, MODE happens:

  illegal   answers `bestmove a1a1`
  crash     exits at once (status 3)
  stall     never answers again
  slow      waits for longer than its clock (or 1 s at a node limit), then answers
  mute      (at start-up, AFTER is ignored) never answers `uci`
  garbage   answers with a long line of binary junk, then `bestmove` of junk

Without ENGINE, AFTER must be 0: the script answers `uci` and `isready` itself.
"""
import os
import subprocess
import sys
import threading
import time


def main():
    mode = sys.argv[1]
    after = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    engine_cmd = sys.argv[3:]
    out = sys.stdout
    lock = threading.Lock()

    def say(line):
        with lock:
            out.write(line + "\n")
            out.flush()

    if mode == "mute":
        for _ in sys.stdin:
            pass
        return
    engine = None
    if engine_cmd:
        engine = subprocess.Popen(engine_cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1)

        def pump():
            for line in engine.stdout:
                say(line.rstrip("\n"))

        threading.Thread(target=pump, daemon=True).start()
    elif after != 0:
        sys.exit("faulty_uci.py: AFTER > 0 needs an ENGINE to play the moves before the fault")

    gos = 0
    for raw in sys.stdin:
        line = raw.strip()
        if line.startswith("go") and gos == after:
            if mode == "illegal":
                say("info depth 1 score cp 0")
                say("bestmove a1a1")
            elif mode == "crash":
                os._exit(3)
            elif mode == "stall":
                while True:
                    time.sleep(60)
            elif mode == "slow":
                words = line.split()
                clock = [int(words[i + 1]) for i, w in enumerate(words)
                         if w in ("wtime", "btime") and i + 1 < len(words)]
                time.sleep((max(clock) if clock else 1000) / 1000.0 + 0.3)
                say("bestmove e2e4")
            elif mode == "garbage":
                say("\x00\xff" * 100000)
                say("bestmove \x01\x02zz")
            gos += 1
            continue
        if line.startswith("go"):
            gos += 1
        if engine is not None:
            try:
                engine.stdin.write(line + "\n")
                engine.stdin.flush()
            except BrokenPipeError:
                os._exit(4)
        elif line == "uci":
            say("id name faulty")
            say("uciok")
        elif line == "isready":
            say("readyok")
        if line == "quit":
            break
    if engine is not None:
        engine.kill()


if __name__ == "__main__":
    main()
