"""Cold start and peak RSS of the tagwarden Lambda binary, driven through the real Runtime API.

Starts moto and `cargo lambda watch --only-lambda-apis` on free loopback ports, seeds a policy and
owned instances, then for each of several cold starts: spawns the bootstrap against a probe Runtime
API that notes when it first asks for an invocation (`GET …/runtime/invocation/next`: where
Lambda's own Init phase ends) and kills it; spawns it again against cargo-lambda and invokes it once (spawn to the first response = cold start to the first handled event, which
includes the policy fetch and the event's calls: moto's own time is measured apart), invokes it
again without drift and with drift, and reads VmHWM (peak RSS) from /proc. Prints a small table,
and with --json one JSON object on the last line.
"""
import http.client
import http.server
import threading
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

import boto3

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV = os.path.join(ROOT, ".tools", "venv", "bin")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port}")


def invoke(port, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/2015-03-31/functions/_/invocations", data=body.encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class InitProbe:
    """A Runtime API that only notes when the bootstrap first asks for an invocation (the end of
    Lambda's Init phase) and never hands one out: the process is killed after."""

    def __init__(self):
        self.first_next = None
        probe = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.endswith("/runtime/invocation/next") and probe.first_next is None:
                    probe.first_next = time.monotonic()
                time.sleep(5)  # a long poll that the kill ends

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def measure(self, bootstrap, env):
        """ms from spawn to the first `next`."""
        self.first_next = None
        started = time.monotonic()
        fn = subprocess.Popen([bootstrap], env={**env, "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{self.port}"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while self.first_next is None and fn.poll() is None and time.monotonic() - started < 30:
                time.sleep(0.0002)
            if self.first_next is None:
                raise SystemExit(f"the bootstrap never asked for an invocation (exit {fn.poll()})")
            return (self.first_next - started) * 1000
        finally:
            fn.kill()
            fn.wait()


class DelayProxy:
    """Forwards every AWS call to moto after a fixed delay: round trips that cost what a real
    region's do, so a batch's time says how many are made one after another."""

    def __init__(self, upstream_port, delay_s):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                time.sleep(delay_s)
                conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=120)
                conn.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def batch_latency(bootstrap, env, rt_port, ec2, image, owned, event, concurrency):
    """One SQS batch of 10 RunInstances events (10 drifted instances) through a fresh bootstrap
    whose calls each take 30 ms more; returns the batch's wall time in ms."""
    ids = [i["InstanceId"] for i in ec2.run_instances(ImageId=image, MinCount=11, MaxCount=11,
                                                     TagSpecifications=owned)["Instances"]]
    fn = subprocess.Popen([bootstrap], env={**env, "TAGWARDEN_CONCURRENCY": str(concurrency)},
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        status, body = invoke(rt_port, event(ids[0]))  # warm: the policy is read once
        assert status == 200, body
        records = [{"messageId": f"m{n}", "eventSource": "aws:sqs", "body": event(iid)} for n, iid in enumerate(ids[1:])]
        t = time.monotonic()
        status, body = invoke(rt_port, json.dumps({"Records": records}))
        elapsed = (time.monotonic() - t) * 1000
        assert status == 200 and json.loads(body) == {"batchItemFailures": []}, body
        return elapsed
    finally:
        fn.kill()
        fn.wait()


def timed_moto_calls(s3, ec2, iid, tags):
    """The calls the first event makes (policy, tags, attached volumes, the write), straight to
    moto from a fresh client: the emulator's own share of the first event."""
    t = time.monotonic()
    s3.get_object(Bucket="policy", Key="p.json")["Body"].read()
    ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [iid]}])
    ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [iid]}])
    ec2.create_tags(Resources=[iid], Tags=tags)
    return (time.monotonic() - t) * 1000


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def start_moto(procs):
    """moto on a free loopback port (its process appended to `procs`): its endpoint and boto3's
    client arguments for it."""
    port = free_port()
    procs.append(subprocess.Popen([os.path.join(VENV, "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait_port(port)
    endpoint = f"http://127.0.0.1:{port}"
    return endpoint, dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")


def main(bootstrap, zip_path):
    rt_port = free_port()
    procs = []
    try:
        endpoint, aws = start_moto(procs)
        moto_port = int(endpoint.rsplit(":", 1)[1])
        s3, ec2 = boto3.client("s3", **aws), boto3.client("ec2", **aws)
        s3.create_bucket(Bucket="policy")
        policy = {"kind": "Infrastructure", "status": {"infrastructureName": "m-1", "platformStatus": {"type": "AWS", "aws": {
            "resourceTags": [{"key": f"tag-{i:02}", "value": f"v{i}"} for i in range(25)]}}}}
        s3.put_object(Bucket="policy", Key="p.json", Body=json.dumps(policy).encode())
        desired = [{"Key": t["key"], "Value": t["value"]} for t in policy["status"]["platformStatus"]["aws"]["resourceTags"]]
        image = ec2.describe_images()["Images"][0]["ImageId"]
        owned = [{"ResourceType": "instance", "Tags": [{"Key": "kubernetes.io/cluster/m-1", "Value": "owned"}]}]
        runs = int(os.environ.get("RUNS", "11"))
        # Per run: the cold event's instance, then WARM rounds of a clean event (that instance again)
        # and a drift event (a fresh instance), alternating: a loopback stall of ~40 ms (delayed ACK)
        # lands on one invocation or another from run to run, so one sample of each measured a
        # stall, not the code. Medians over every round.
        warm_rounds = int(os.environ.get("WARM", "5"))
        per_run = 1 + warm_rounds
        ids = [i["InstanceId"] for i in ec2.run_instances(ImageId=image, MinCount=per_run * runs,
                                                         MaxCount=per_run * runs, TagSpecifications=owned)["Instances"]]
        fixture = open(os.path.join(ROOT, "tests/fixtures/events/aws/ec2-run-instances-sso.json")).read()
        event = lambda iid: fixture.replace("i-0123456789abcdef0", iid).replace("111122223333", "123456789012").replace("eu-west-1", "us-east-1")

        watch = subprocess.Popen([os.path.join(VENV, "cargo-lambda"), "lambda", "watch", "--only-lambda-apis",
                                  "--invoke-address", "127.0.0.1", "--invoke-port", str(rt_port)],
                                 cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(watch)
        wait_port(rt_port)
        probe = InitProbe()
        env = {"PATH": os.environ.get("PATH", ""), "AWS_LAMBDA_RUNTIME_API": f"http://127.0.0.1:{rt_port}/.rt",
               "AWS_LAMBDA_FUNCTION_NAME": "_", "AWS_LAMBDA_FUNCTION_VERSION": "1", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
               "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "TAGWARDEN_POLICY": "s3://policy/p.json", "RUST_LOG": "warn",
               # The handler's own latency, not its write pacing (5 a second by default).
               "TAGWARDEN_EC2_WRITES_PER_SECOND": "100"}
        cold, init, warm_drift, warm_clean, rss, emulator = [], [], [], [], [], []
        for n in range(runs):
            init.append(probe.measure(bootstrap, env))
            started = time.monotonic()
            fn = subprocess.Popen([bootstrap], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            first = ids[per_run * n]
            status, body = invoke(rt_port, event(first))
            cold.append((time.monotonic() - started) * 1000)
            assert status == 200, body
            fresh = boto3.client("s3", **aws), boto3.client("ec2", **aws)
            emulator.append(timed_moto_calls(*fresh, first, desired))
            for k in range(warm_rounds):
                t = time.monotonic(); invoke(rt_port, event(first)); warm_clean.append((time.monotonic() - t) * 1000)
                t = time.monotonic(); invoke(rt_port, event(ids[per_run * n + 1 + k])); warm_drift.append((time.monotonic() - t) * 1000)
            rss.append(peak_rss_kib(fn.pid) / 1024)
            fn.kill()
            fn.wait()
        delayed = DelayProxy(moto_port, 0.030)
        slow_env = {**env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{delayed.port}"}
        batch = {c: statistics.median(batch_latency(bootstrap, slow_env, rt_port, ec2, image, owned, event, c)
                                      for _ in range(3)) for c in (1, 10)}
        size = os.path.getsize(bootstrap) / 2**20
        print(f"binary     {bootstrap}: {size:.1f} MiB" + (f", zip {os.path.getsize(zip_path) / 2**20:.1f} MiB" if zip_path else ""))
        print(f"init phase (spawn to the first Runtime API `next`), median of {runs}: {statistics.median(init):.1f} ms "
              f"(min {min(init):.1f}, max {max(init):.1f})")
        print(f"cold start to the first handled event (drift: 1 write), median of {runs}: {statistics.median(cold):.0f} ms "
              f"(min {min(cold):.0f}, max {max(cold):.0f}); includes the policy fetch")
        print(f"moto's own time for that event's calls (policy GetObject, DescribeTags, DescribeVolumes, CreateTags, "
              f"boto3 straight to moto), median: {statistics.median(emulator):.0f} ms")
        p90 = lambda xs: sorted(xs)[int(0.9 * (len(xs) - 1))]
        print(f"warm event, no drift: median {statistics.median(warm_clean):.1f} ms (p90 {p90(warm_clean):.1f}); "
              f"warm event, drift: median {statistics.median(warm_drift):.1f} ms (p90 {p90(warm_drift):.1f}); "
              f"{len(warm_clean)} of each, alternating (moto on loopback)")
        print(f"peak RSS after 3 events: {statistics.median(rss):.1f} MiB (max {max(rss):.1f})")
        print(f"SQS batch of 10 drifted instances, 30 ms added per AWS call, median of 3: one at a time "
              f"(TAGWARDEN_CONCURRENCY=1) {batch[1]:.0f} ms, side by side (10) {batch[10]:.0f} ms "
              f"({batch[1] / batch[10]:.1f}x)")
        if "--json" in sys.argv:
            print(json.dumps({"binary_mib": round(size, 2), "runs": runs,
                              "init_ms": round(statistics.median(init), 1),
                              "first_event_ms": round(statistics.median(cold), 1),
                              "emulator_ms": round(statistics.median(emulator), 1),
                              "warm_clean_ms": round(statistics.median(warm_clean), 1),
                              "warm_drift_ms": round(statistics.median(warm_drift), 1),
                              "peak_rss_mib": round(statistics.median(rss), 1),
                              "batch_sequential_ms": round(batch[1]), "batch_concurrent_ms": round(batch[10])}))
    finally:
        for p in procs:
            p.kill()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--json"]
    main(args[0], args[1] if len(args) > 1 else "")
