"""Measurement helpers for scripts/bench-stack.sh (stdlib only).

  stack_probe.py token  STATE_DIR              control token of the running boot
  stack_probe.py phases STATE_DIR              boot phase durations (ms) of the first boot
  stack_probe.py sse URL N [header=value ...]  time to first chunk / throughput of N streamed chats

Secrets come from the environment (BENCH_BEARER), never argv.
"""
import glob
import json
import os
import sqlite3
import statistics
import sys
import time
import urllib.request


def databases(state_dir):
    for path in glob.glob(os.path.join(state_dir, "**", "*.sqlite"), recursive=True):
        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            con.execute("SELECT 1 FROM boots LIMIT 1")
            yield con
        except sqlite3.Error:
            continue


def token(state_dir):
    for con in databases(state_dir):
        row = con.execute("SELECT control_token FROM boots WHERE ended_at IS NULL ORDER BY started_at DESC").fetchone()
        if row:
            print(row[0])
            return
    sys.exit("no running boot found")


def phases(state_dir):
    for con in databases(state_dir):
        rows = con.execute("SELECT kind, ts FROM events WHERE kind LIKE 'boot-%' OR kind LIKE 'phase-%' ORDER BY seq").fetchall()
        if not rows:
            continue
        marks = {}
        for kind, ts in rows:
            marks.setdefault(kind, ts)
        order = ["boot-start", "phase-supervisor", "phase-provision", "phase-hermes", "phase-ready", "boot-ready"]
        names = ["container_start", "supervisor_ready", "provisioning", "hermes_start_to_ready", "record"]
        out = {}
        for name, a, b in zip(names, order, order[1:]):
            if a in marks and b in marks:
                out[name + "_ms"] = marks[b] - marks[a]
        if "boot-start" in marks and "boot-ready" in marks:
            out["total_ms"] = marks["boot-ready"] - marks["boot-start"]
        print(json.dumps(out))
        return
    sys.exit("no boot events found")


def sse(url, n, headers):
    body = json.dumps({"model": "hermes-agent", "stream": True,
                       "messages": [{"role": "user", "content": "word " * 400}]}).encode()
    firsts, rates = [], []
    for _ in range(n):
        req = urllib.request.Request(url, data=body, method="POST")
        req.add_header("content-type", "application/json")
        req.add_header("authorization", "Bearer " + os.environ["BENCH_BEARER"])
        for h in headers:
            k, v = h.split("=", 1)
            req.add_header(k, v)
        start = time.perf_counter()
        first = None
        total = 0
        with urllib.request.urlopen(req, timeout=120) as resp:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                if first is None and b"content" in chunk:
                    first = time.perf_counter() - start
                total += len(chunk)
        elapsed = time.perf_counter() - start
        firsts.append(first or elapsed)
        rates.append(total / elapsed)
    print(json.dumps({"ttfb_ms_p50": round(statistics.median(firsts) * 1000, 2),
                      "bytes_per_s_p50": round(statistics.median(rates))}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "token":
        token(sys.argv[2])
    elif cmd == "phases":
        phases(sys.argv[2])
    elif cmd == "sse":
        sse(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    else:
        sys.exit(__doc__)
