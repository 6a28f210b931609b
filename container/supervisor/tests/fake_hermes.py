"""A stand-in for Hermes' API server, for fast proxy and readiness tests.

Started by the supervisor exactly like the real gateway (as the hermes uid,
with the minimal environment); reads the port and key from $HERMES_HOME/.env
the way Hermes does. Routes exercise what the proxy must handle: header
injection, streamed uploads, endless and dying SSE streams, slow headers.
Events the test needs to observe are appended to $HERMES_HOME/fake-events.
Standard library only (runs on the system python3).
"""

import hashlib
import http.server
import json
import os
import socketserver
import sys
import time

HOME = os.environ["HERMES_HOME"]


def read_env():
    env = {}
    with open(os.path.join(HOME, ".env")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, value = line.split("=", 1)
            if value.startswith("'") and value.endswith("'"):
                value = value[1:-1].replace("\\'", "'").replace("\\\\", "\\")
            env[key] = value
    return env


ENV = read_env()
PORT = int(ENV["API_SERVER_PORT"])
KEY = ENV["API_SERVER_KEY"]


def record(event):
    with open(os.path.join(HOME, "fake-events"), "a") as f:
        f.write(event + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def authorised(self):
        return self.headers.get("Authorization") == "Bearer " + KEY

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def start_chunked(self, content_type):
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        if self.path == "/health":
            return self.send_json(200, {"status": "ok", "platform": "hermes-agent", "version": "fake"})
        if not self.authorised():
            return self.send_json(401, {"error": "invalid_api_key"})
        if self.path.startswith("/echo"):
            headers = {k.lower(): v for k, v in self.headers.items()}
            return self.send_json(200, {"path": self.path, "headers": headers})
        if self.path == "/sse/slow":
            self.start_chunked("text/event-stream")
            try:
                for i in range(100000):
                    self.chunk(b'data: {"n": %d}\n\n' % i)
                    time.sleep(0.1)
            except (BrokenPipeError, ConnectionResetError):
                record("client-gone /sse/slow")
            return
        if self.path == "/sse/die":
            self.start_chunked("text/event-stream")
            self.chunk(b'data: {"n": 0}\n\n')
            time.sleep(0.3)
            record("dying")
            os._exit(3)
        if self.path == "/json/slow":
            self.start_chunked("application/json")
            try:
                self.chunk(b'{"partial": ')
                time.sleep(30)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if self.path == "/slow-headers":
            time.sleep(10)
            return self.send_json(200, {"late": True})
        if self.path.startswith("/sse/fast"):
            # n events (?n=, default 2000) of 1 KiB as fast as possible.
            n, size = 2000, 1024
            if "?n=" in self.path:
                n = int(self.path.split("?n=", 1)[1])
            self.start_chunked("text/event-stream")
            payload = b"data: " + b"x" * (size - 8) + b"\n\n"
            for _ in range(n):
                self.chunk(payload)
            self.wfile.write(b"0\r\n\r\n")
            return
        return self.send_json(404, {"error": "not_found"})

    def do_POST(self):
        if not self.authorised():
            return self.send_json(401, {"error": "invalid_api_key"})
        digest = hashlib.sha256()
        total = 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data = self.rfile.read(size)
                self.rfile.readline()
                digest.update(data)
                total += len(data)
        else:
            remaining = int(self.headers.get("Content-Length", "0"))
            while remaining:
                data = self.rfile.read(min(remaining, 65536))
                if not data:
                    break
                digest.update(data)
                total += len(data)
                remaining -= len(data)
        return self.send_json(200, {"bytes": total, "sha256": digest.hexdigest(), "path": self.path})


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


if __name__ == "__main__":
    record("started uid=%d" % os.getuid())
    Server(("127.0.0.1", PORT), Handler).serve_forever()
    sys.exit(0)
