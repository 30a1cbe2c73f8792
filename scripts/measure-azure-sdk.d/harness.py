"""Spawn each binary RUNS times against a local managed-identity endpoint (http, App Service protocol)
and a local blob endpoint (https, test CA); report medians (ms) from spawn to: clients constructed
(printed by the binary, CLOCK_MONOTONIC), first token request received, blob request received, done."""
import http.server, json, os, ssl, statistics, subprocess, sys, threading, time

BODY = json.dumps({"tags": {f"k{i}": f"v{i}" for i in range(25)}}).encode() * 8
arrivals = {}

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *a): pass
    def do_GET(self):
        t = time.monotonic_ns()
        if self.path.startswith("/msi"):
            arrivals.setdefault("token", t)
            assert self.headers.get("X-IDENTITY-HEADER") == "secret", self.headers
            b = json.dumps({"access_token": "tok", "expires_on": str(int(time.time()) + 3600),
                            "resource": "https://storage.azure.com", "token_type": "Bearer"}).encode()
            self.send_response(200); self.send_header("Content-Type", "application/json")
        else:
            arrivals.setdefault("blob", t)
            assert self.headers.get("Authorization") == "Bearer tok", self.headers
            b = BODY
            self.send_response(200)
            self.send_header("ETag", '"0x8DC0FFEE"'); self.send_header("x-ms-blob-type", "BlockBlob")
            self.send_header("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)

def serve(tls):
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H); s.daemon_threads = True
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain("certs/srv.pem", "certs/srv.key")
        s.socket = ctx.wrap_socket(s.socket, server_side=True)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s.server_address[1]

msi, blob = serve(False), serve(True)
RUNS = int(os.environ.get("RUNS", "20"))
bins = sys.argv[1:]
env = dict(os.environ, IDENTITY_ENDPOINT=f"http://127.0.0.1:{msi}/msi", IDENTITY_HEADER="secret",
           BLOB_URL=f"https://127.0.0.1:{blob}/devstoreaccount1/policies/policy.json",
           TEST_CA="certs/ca.pem", SSL_CERT_FILE="certs/bundle.pem")
res = {b: {"constructed": [], "token": [], "blob": [], "done": [], "exit": []} for b in bins}
for i in range(RUNS + 2):  # 2 warm-up rounds (page cache), not counted
    for b in (bins if i % 2 == 0 else bins[::-1]):
        arrivals.clear()
        t0 = time.monotonic_ns()
        p = subprocess.run([b], env=env, capture_output=True, text=True)
        te = time.monotonic_ns()
        if p.returncode != 0: sys.exit(f"{b}: {p.stderr}")
        out = dict(l.split(" ", 1) for l in p.stdout.splitlines())
        if i < 2: continue
        r = res[b]
        r["constructed"].append((int(out["constructed"]) - t0) / 1e6)
        r["done"].append((int(out["done"].split()[0]) - t0) / 1e6)
        r["token"].append((arrivals["token"] - t0) / 1e6)
        r["blob"].append((arrivals["blob"] - t0) / 1e6)
        r["exit"].append((te - t0) / 1e6)
print(f"{'binary':28} " + " ".join(f"{k:>16}" for k in ["constructed", "token req", "blob req", "done", "exit"]))
for b in bins:
    r = res[b]
    print(f"{os.path.basename(os.path.dirname(os.path.dirname(b))) or b:28} " + " ".join(
        f"{statistics.median(r[k]):7.2f} ({min(r[k]):5.2f})" for k in ["constructed", "token", "blob", "done", "exit"]))
print("median (min) ms from spawn, runs:", RUNS, "last stdout:", p.stdout.strip().splitlines()[-1])
