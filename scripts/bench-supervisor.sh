#!/usr/bin/env bash
# Measure hermes-supervisor (release build) on this machine:
#   * exec → control API ready (first /_control/health 200), supervisor RSS;
#   * boot split: supervisor ready / provisioning / Hermes start → /health;
#   * streaming proxy overhead vs talking to Hermes directly, in one run:
#     time to first chunk and throughput ratio, (a) through the real Hermes
#     chat stream against a fast local mock model, (b) raw SSE from a
#     stand-in API server (proxy cost without Hermes' per-token Python cost);
#   * terminal (as root): `exec` of `true` through the whole boundary
#     (HTTP round trip + uid switch + netns + mount ns + Landlock + sh -c)
#     vs a bare fork/exec of /bin/true and of `sh -c true`, interleaved in
#     one run, p50/p90.
# Needs the Hermes venv (scripts/setup-hermes.sh). Prints one line per number
# and a JSON summary (last line).
# Usage: scripts/bench-supervisor.sh [--runs N] [--only terminal]
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=5
only=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="${2:-5}"; shift 2 ;;
    --only) only="${2:-}"; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--only terminal]" >&2; exit 2 ;;
  esac
done

cd "$repo_root"
"$repo_root/scripts/setup-hermes.sh" >/dev/null
cargo build --quiet --profile supervisor -p hermes-supervisor
export BENCH_SUPERVISOR="$repo_root/target/supervisor/hermes-supervisor"
export BENCH_HERMES_BIN="$repo_root/.venv/hermes/bin/hermes"
export BENCH_FAKE_API="$repo_root/container/supervisor/tests/fake_hermes.py"
export BENCH_REQUIREMENTS="$repo_root/container/requirements.txt"
export BENCH_RUNS="$runs"
export BENCH_ONLY="$only"

exec /usr/bin/python3 - <<'PY'
import http.client, json, os, secrets, shutil, socket, statistics, subprocess, sys, tempfile, threading, time
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn

SUP = os.environ["BENCH_SUPERVISOR"]
RUNS = int(os.environ["BENCH_RUNS"])
TOKENS = 3000  # mock model tokens per streamed reply


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


class Mock(BaseHTTPRequestHandler):
    """Fast OpenAI-compatible mock: /v1/models and SSE chat completions."""
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "mock-model", "object": "model"}]}).encode()
        code = 200 if self.path == "/v1/models" else 404
        self.send_response(code); self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        def chunk(delta, fin=None):
            return ("data: " + json.dumps({"id": "m", "object": "chat.completion.chunk", "created": 0, "model": "mock-model",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]}) + "\n\n").encode()
        self.send_response(200); self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close"); self.end_headers()
        n = TOKENS if req.get("stream") else 1
        self.wfile.write(chunk({"role": "assistant"}))
        for i in range(n):
            self.wfile.write(chunk({"content": "tok%d " % i}))
        self.wfile.write(chunk({}, "stop")); self.wfile.write(b"data: [DONE]\n\n"); self.wfile.flush()


class Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True


def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])


class Supervisor:
    def __init__(self, hermes_bin, mock_url=None):
        # Under /var/tmp: terminal commands get a private /tmp.
        self.root = tempfile.mkdtemp(prefix="bench-sup-", dir="/var/tmp"); os.chmod(self.root, 0o755)
        self.token = secrets.token_hex(24); self.key = secrets.token_hex(32)
        self.api_port = free_port()
        env = {"PATH": "/usr/bin:/bin", "CONTROL_TOKEN": self.token, "BOOT_ID": "bench", "AGENT_ID": "bench-agent",
               "HERMES_CONTROL_HOST": "127.0.0.1", "HERMES_CONTROL_PORT": "0", "HERMES_API_PORT": str(self.api_port),
               "HERMES_HOME_DIR": self.root + "/home", "HERMES_STATE_DIR": self.root + "/state",
               "HERMES_WORKSPACE_DIR": self.root + "/workspace", "HERMES_LANDLOCK_CANARY_DIR": self.root + "/canary",
               "HERMES_BIN": hermes_bin, "HERMES_REQUIREMENTS": os.environ["BENCH_REQUIREMENTS"]}
        if mock_url:
            env["HERMES_MOCK_MODEL_URL"] = mock_url
        t0 = time.perf_counter()
        self.proc = subprocess.Popen([SUP], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode()
        self.port = int(line.strip().rsplit(":", 1)[1])
        while True:
            try:
                if self.call("GET", "/_control/health")[0] == 200:
                    break
            except OSError:
                pass
        self.exec_to_ready_ms = (time.perf_counter() - t0) * 1000
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()

    def call(self, method, path, body=None, port=None, auth=None, timeout=120):
        c = http.client.HTTPConnection("127.0.0.1", port or self.port, timeout=timeout)
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"authorization": auth or "Bearer " + self.token, "content-type": "application/json"})
        r = c.getresponse(); data = r.read(); c.close()
        return r.status, data

    def provision(self):
        t0 = time.perf_counter()
        st, data = self.call("POST", "/_control/provision", {"apiServerKey": self.key, "providerEnv": {},
            "vertexSaJson": None, "defaultModel": None, "approvalsMode": "manual", "keyFingerprint": "bench"})
        assert st == 200, data
        return (time.perf_counter() - t0) * 1000

    def start_hermes(self):
        t0 = time.perf_counter()
        st, data = self.call("POST", "/_control/hermes/start"); assert st == 200, data
        while json.loads(self.call("GET", "/_control/hermes/ready")[1])["ready"] is not True:
            time.sleep(0.02)
            if time.perf_counter() - t0 > 120:
                raise SystemExit("Hermes not ready after 120 s")
        return (time.perf_counter() - t0) * 1000

    def close(self):
        try:
            self.call("POST", "/_control/hermes/stop", timeout=20)
        except OSError:
            pass
        self.proc.kill(); self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def stream(port, path, auth, body=None):
    """(time to first body byte ms, bytes, seconds) of one streamed response."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    t0 = time.perf_counter()
    c.request("POST" if body is not None else "GET", path, body=json.dumps(body) if body is not None else None,
              headers={"authorization": auth, "content-type": "application/json"})
    r = c.getresponse(); assert r.status == 200, (r.status, r.read()[:300])
    first = None; total = 0
    while True:
        data = r.read1(65536)
        if not data:
            break
        if first is None:
            first = time.perf_counter()
        total += len(data)
    end = time.perf_counter(); c.close()
    return (first - t0) * 1000, total, end - t0


def compare(label, direct, proxied):
    """Alternate direct/proxied runs; medians of TTFC and throughput."""
    d_ttfc, p_ttfc, d_tp, p_tp = [], [], [], []
    for _ in range(RUNS):
        for fn, ttfc, tp in ((direct, d_ttfc, d_tp), (proxied, p_ttfc, p_tp)):
            first, nbytes, secs = fn()
            ttfc.append(first); tp.append(nbytes / secs)
    m = statistics.median
    res = {"direct_ttfc_ms": round(m(d_ttfc), 1), "proxied_ttfc_ms": round(m(p_ttfc), 1),
           "direct_mib_s": round(m(d_tp) / 2**20, 2), "proxied_mib_s": round(m(p_tp) / 2**20, 2),
           "throughput_ratio": round(m(p_tp) / m(d_tp), 3), "runs": RUNS}
    print("%s: TTFC direct %.1f ms / proxied %.1f ms; throughput direct %.2f MiB/s / proxied %.2f MiB/s; ratio %.3f"
          % (label, res["direct_ttfc_ms"], res["proxied_ttfc_ms"], res["direct_mib_s"], res["proxied_mib_s"], res["throughput_ratio"]))
    return res


def pct(values, q):
    v = sorted(values); return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def bare_spawn_ms(argv):
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, {"PATH": "/usr/bin:/bin"})
    os.waitpid(pid, 0)
    return (time.perf_counter() - t0) * 1000


def bench_terminal(summary):
    if os.geteuid() != 0:
        print("SKIP terminal exec: needs root (the boundary needs a uid switch and namespaces)")
        return
    s = Supervisor("/nonexistent")
    try:
        deadline = time.time() + 60
        while True:
            st, data = s.call("GET", "/_control/terminal/status")
            status = json.loads(data)
            if st == 200 and status.get("available"):
                break
            if time.time() > deadline:
                raise SystemExit("terminal boundary not available: %s" % data)
            time.sleep(0.05)
        n = max(100, RUNS * 40)
        bare_true, bare_sh, boundary, server = [], [], [], []
        for _ in range(10):  # warm-up
            s.call("POST", "/_control/terminal/exec", {"command": "true"})
        for _ in range(n):
            bare_true.append(bare_spawn_ms(["/bin/true"]))
            bare_sh.append(bare_spawn_ms(["/bin/sh", "-c", "true"]))
            t0 = time.perf_counter()
            st, data = s.call("POST", "/_control/terminal/exec", {"command": "true"})
            boundary.append((time.perf_counter() - t0) * 1000)
            body = json.loads(data); assert st == 200 and body["exitCode"] == 0, data
            server.append(body["durationMs"])
        res = {"runs": n,
               "bare_true_p50_ms": round(pct(bare_true, .5), 2), "bare_true_p90_ms": round(pct(bare_true, .9), 2),
               "bare_sh_c_true_p50_ms": round(pct(bare_sh, .5), 2), "bare_sh_c_true_p90_ms": round(pct(bare_sh, .9), 2),
               "boundary_exec_roundtrip_p50_ms": round(pct(boundary, .5), 2),
               "boundary_exec_roundtrip_p90_ms": round(pct(boundary, .9), 2),
               "boundary_exec_server_duration_p50_ms": pct(server, .5)}
        print("terminal exec of `true` (%d interleaved runs): bare /bin/true p50 %.2f ms (p90 %.2f); bare sh -c true p50 %.2f ms (p90 %.2f); "
              "through the boundary p50 %.2f ms (p90 %.2f) HTTP round trip, %s ms spawn→exit in the supervisor"
              % (n, res["bare_true_p50_ms"], res["bare_true_p90_ms"], res["bare_sh_c_true_p50_ms"], res["bare_sh_c_true_p90_ms"],
                 res["boundary_exec_roundtrip_p50_ms"], res["boundary_exec_roundtrip_p90_ms"], res["boundary_exec_server_duration_p50_ms"]))
        summary["terminal_exec_true"] = res
    finally:
        s.close()


summary = {}
if os.environ.get("BENCH_ONLY") == "terminal":
    bench_terminal(summary)
    print(json.dumps(summary))
    sys.exit(0)
mock = Server(("127.0.0.1", 0), Mock); threading.Thread(target=mock.serve_forever, daemon=True).start()
mock_url = "http://127.0.0.1:%d/v1" % mock.server_address[1]

# Exec → ready and idle RSS, several cold starts.
starts = []
for _ in range(RUNS):
    s = Supervisor("/nonexistent"); starts.append((s.exec_to_ready_ms, rss_kib(s.proc.pid))); s.close()
summary["exec_to_control_ready_ms"] = round(statistics.median(x[0] for x in starts), 2)
summary["supervisor_idle_rss_kib"] = statistics.median(x[1] for x in starts)
print("supervisor exec → control API ready: median %.2f ms (%s)" % (summary["exec_to_control_ready_ms"], ", ".join("%.1f" % x[0] for x in starts)))
print("supervisor idle RSS: %d KiB" % summary["supervisor_idle_rss_kib"])

# Boot split with the real Hermes.
s = Supervisor(os.environ["BENCH_HERMES_BIN"], mock_url)
try:
    prov = s.provision(); hermes = s.start_hermes()
    summary["boot_split_ms"] = {"supervisor": round(s.exec_to_ready_ms, 1), "provisioning": round(prov, 1), "hermes_start_to_health": round(hermes, 1)}
    print("boot split: supervisor %.1f ms, provisioning %.1f ms, Hermes start → /health %.1f ms" % (s.exec_to_ready_ms, prov, hermes))
    chat = {"model": "hermes-agent", "stream": True, "messages": [{"role": "user", "content": "bench"}]}
    stream(s.port, "/_control/hermes-api/v1/chat/completions", "Bearer " + s.token, chat)  # warm-up (first turn probes the model)
    summary["hermes_chat_stream"] = compare(
        "Hermes chat SSE (%d tokens)" % TOKENS,
        lambda: stream(s.api_port, "/v1/chat/completions", "Bearer " + s.key, chat),
        lambda: stream(s.port, "/_control/hermes-api/v1/chat/completions", "Bearer " + s.token, chat))
    summary["supervisor_rss_after_streams_kib"] = rss_kib(s.proc.pid)
    print("supervisor RSS after streaming: %d KiB" % summary["supervisor_rss_after_streams_kib"])
finally:
    s.close()

# Raw SSE from the stand-in API server: proxy cost alone.
fake_bin = tempfile.mkdtemp(prefix="bench-fake-"); os.chmod(fake_bin, 0o755)
with open(fake_bin + "/fake-hermes", "w") as f:
    f.write("#!/bin/sh\nexec /usr/bin/python3 %s\n" % os.environ["BENCH_FAKE_API"])
os.chmod(fake_bin + "/fake-hermes", 0o755)
s = Supervisor(fake_bin + "/fake-hermes")
try:
    s.provision(); s.start_hermes()
    summary["raw_sse_20000x1KiB"] = compare(
        "raw SSE (20000 x 1 KiB events)",
        lambda: stream(s.api_port, "/sse/fast?n=20000", "Bearer " + s.key),
        lambda: stream(s.port, "/_control/hermes-api/sse/fast?n=20000", "Bearer " + s.token))
finally:
    s.close(); shutil.rmtree(fake_bin, ignore_errors=True)
bench_terminal(summary)
print(json.dumps(summary))
PY
