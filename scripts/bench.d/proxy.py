"""Counting HTTP proxy in front of moto_server (loopback only, stdlib only).

    python proxy.py --listen-port P --upstream-port M

Every request is forwarded unchanged to http://127.0.0.1:M and counted by AWS operation, named
"<service>:<Operation>" where the service comes from the SigV4 credential scope and the operation
from the wire protocol:

* JSON protocols (Resource Groups Tagging API, SSM, STS-JSON...): the ``X-Amz-Target`` header;
* query protocols (EC2, IAM, ELBv2, STS): ``Action=`` in the query string or the form body;
* S3 REST: method + path + sub-resource query (``PUT /b?tagging`` = PutBucketTagging, ``GET /`` =
  ListBuckets, ``GET /b/k`` = GetObject...).

So the counts come from the HTTP layer, never from the tool being measured. Control endpoints
(not forwarded): ``GET /__counts`` returns ``{"calls": {op: n}, "errors": {op: n}, "seconds": {op: s}}``
(errors are HTTP status >= 400; seconds is the time moto took to answer, summed per operation),
``POST /__counts/reset`` zeroes them.
"""

import argparse
import http.client
import http.server
import json
import re
import socket
import threading
import time
import urllib.parse
from collections import Counter

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}

# S3 bucket sub-resources whose operation name is not simply Get/Put/Delete + "Bucket" + CamelCase.
S3_BUCKET_SUBRESOURCES = {
    "tagging": "Tagging", "location": "Location", "policy": "Policy", "policyStatus": "PolicyStatus",
    "acl": "Acl", "versioning": "Versioning", "logging": "Logging", "website": "Website",
    "encryption": "Encryption", "lifecycle": "LifecycleConfiguration", "cors": "Cors",
    "notification": "NotificationConfiguration", "replication": "Replication",
    "publicAccessBlock": "PublicAccessBlock", "ownershipControls": "OwnershipControls",
    "object-lock": "ObjectLockConfiguration", "accelerate": "AccelerateConfiguration",
    "requestPayment": "RequestPayment", "intelligent-tiering": "IntelligentTieringConfiguration",
    "analytics": "AnalyticsConfiguration", "inventory": "InventoryConfiguration",
    "metrics": "MetricsConfiguration", "uploads": "MultipartUploads", "versions": "ObjectVersions",
}
VERB = {"GET": "Get", "PUT": "Put", "DELETE": "Delete", "HEAD": "Head", "POST": "Post"}
SERVICE_RE = re.compile(r"Credential=[^/]+/\d+/[^/]+/([^/]+)/aws4_request")


def s3_operation(method, path, query, host):
    """Name an S3 REST call from its method, path and query (path-style or virtual-host)."""
    keys = set(query)
    parts = [p for p in path.split("/") if p]
    hostname = host.split(":")[0]
    if not re.fullmatch(r"[\d.]+|localhost", hostname) and "." in hostname:
        parts.insert(0, hostname.split(".")[0])  # virtual-host style: bucket.<endpoint>
    if not parts:
        return "ListBuckets" if method == "GET" else f"{VERB.get(method, method)}Service"
    if len(parts) == 1:  # bucket level
        for k, name in S3_BUCKET_SUBRESOURCES.items():
            if k in keys:
                if k in ("uploads", "versions"):
                    return f"List{name}"
                return f"{VERB.get(method, method)}Bucket{name}"
        if method == "POST" and "delete" in keys:
            return "DeleteObjects"
        return {
            "GET": "ListObjectsV2" if query.get("list-type") == ["2"] else "ListObjects",
            "PUT": "CreateBucket", "HEAD": "HeadBucket", "DELETE": "DeleteBucket",
        }.get(method, f"{method}Bucket")
    if "tagging" in keys:
        return f"{VERB.get(method, method)}ObjectTagging"
    if "uploads" in keys or "uploadId" in keys:
        return f"{VERB.get(method, method)}MultipartUpload"
    return {"GET": "GetObject", "PUT": "PutObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(
        method, f"{method}Object"
    )


def operation(method, path, query_string, headers, body):
    """'<service>:<Operation>' for one request (see module docstring)."""
    auth = headers.get("Authorization", "")
    m = SERVICE_RE.search(auth)
    service = m.group(1) if m else "unsigned"
    if path.startswith("/moto-api"):
        return "moto-api:" + path
    target = headers.get("X-Amz-Target")
    if target:
        return f"{service}:{target.rsplit('.', 1)[-1]}"
    query = urllib.parse.parse_qs(query_string, keep_blank_values=True)
    if "Action" in query:
        return f"{service}:{query['Action'][0]}"
    ctype = headers.get("Content-Type", "")
    if body and "x-www-form-urlencoded" in ctype:
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        if "Action" in form:
            return f"{service}:{form['Action'][0]}"
    if service == "s3" or service == "unsigned":
        return "s3:" + s3_operation(method, path, query, headers.get("Host", ""))
    return f"{service}:{method} {path}"


class Counts:
    """Thread-safe call and error counters."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls, self.errors, self.seconds = Counter(), Counter(), Counter()

    def add(self, op, status, seconds=0.0):
        with self.lock:
            self.calls[op] += 1
            self.seconds[op] += seconds
            if status >= 400:
                self.errors[op] += 1

    def snapshot(self):
        with self.lock:
            return {"calls": dict(sorted(self.calls.items())), "errors": dict(sorted(self.errors.items())),
                    "seconds": {k: round(v, 3) for k, v in sorted(self.seconds.items())}}

    def reset(self):
        with self.lock:
            self.calls.clear()
            self.errors.clear()
            self.seconds.clear()


class Handler(http.server.BaseHTTPRequestHandler):
    """Forwards one request to moto over a per-thread keep-alive connection and counts it."""

    protocol_version = "HTTP/1.1"
    # Without TCP_NODELAY a keep-alive client waits ~40 ms per call (Nagle + delayed ACK: headers
    # and body go out as two writes), which would add a per-call penalty to whichever tool calls
    # sequentially. Measured (IAM ListRoles): 5-6 ms/call direct to moto; through the proxy 59 ms
    # before this, 6.5-7.5 after.
    disable_nagle_algorithm = True
    upstream_port = 0
    counts = Counts()
    local = threading.local()

    def log_message(self, *args):  # quiet
        pass

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def reply(self, status, body, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def upstream(self, method, path, body, headers):
        for attempt in (0, 1):  # one retry on a stale keep-alive connection
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=900)
                conn.connect()
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                conn.request(method, path, body=body, headers=headers)
                resp = conn.getresponse()
                return resp, resp.read()
            except (http.client.HTTPException, ConnectionError, OSError):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def handle_any(self):
        path, _, query = self.path.partition("?")
        body = self.read_body()
        if path == "/__counts":
            return self.reply(200, json.dumps(self.counts.snapshot()).encode(), [("Content-Type", "application/json")])
        if path == "/__counts/reset":
            self.counts.reset()
            return self.reply(200, b"{}", [("Content-Type", "application/json")])
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP and k.lower() != "content-length"}
        headers["Content-Length"] = str(len(body))
        op = operation(self.command, path, query, self.headers, body)
        started = time.monotonic()
        try:
            resp, data = self.upstream(self.command, self.path, body, headers)
        except Exception as e:  # moto died or hung: the client sees a 502, the count an error
            self.counts.add(op, 502, time.monotonic() - started)
            return self.reply(502, f"proxy: upstream failed: {e}".encode())
        self.counts.add(op, resp.status, time.monotonic() - started)
        out = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP and k.lower() != "content-length"]
        self.reply(resp.status, data, out)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = handle_any


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen-port", type=int, required=True)
    ap.add_argument("--upstream-port", type=int, required=True)
    a = ap.parse_args()
    Handler.upstream_port = a.upstream_port
    server = http.server.ThreadingHTTPServer(("127.0.0.1", a.listen_port), Handler)
    server.daemon_threads = True
    server.request_queue_size = 256
    server.serve_forever()


if __name__ == "__main__":
    main()
