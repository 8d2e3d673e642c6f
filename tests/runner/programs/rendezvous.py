"""A multi-rank program for runner tests, without jax or torch: every rank meets rank 0 over TCP at
MASTER_ADDR:MASTER_PORT (as torch.distributed would) before its steps, so a trial only finishes when
all WORLD_SIZE ranks, wherever they were started, got consistent launcher variables.

argv: steps sleep_ms. Rank 0 writes outputs/ranks.json: what each rank it met saw (RANK, LOCAL_RANK,
PERFKIT_RANK, PERFKIT_SALT).
"""

import json
import os
import socket
import sys
import time

from perfkit import record

steps, sleep_ms = int(sys.argv[1]), float(sys.argv[2])
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
me = {"rank": rank, "local_rank": int(os.environ["LOCAL_RANK"]), "perfkit_rank": int(os.environ["PERFKIT_RANK"]),
      "salt": os.environ.get("PERFKIT_SALT")}

if rank == 0:
    server = socket.create_server((addr, port))
    peers, met = [], [me]
    while len(met) < world:
        conn, _ = server.accept()
        met.append(json.loads(conn.makefile().readline()))
        peers.append(conn)
    for conn in peers:  # everyone is here: go
        conn.sendall(b"go\n")
        conn.close()
    out = record.outputs_dir()
    if out is not None:
        (out / "ranks.json").write_text(json.dumps(sorted(met, key=lambda m: m["rank"])))
else:
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=1)
            break
        except OSError:
            time.sleep(0.05)  # rank 0 not listening yet
    conn.settimeout(None)
    conn.sendall((json.dumps(me) + "\n").encode())
    assert conn.makefile().readline().strip() == "go"

for _ in range(steps):
    t = time.perf_counter()
    time.sleep(sleep_ms / 1e3)
    record.step((time.perf_counter() - t) * 1e3)
