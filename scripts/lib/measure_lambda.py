"""Cold start and peak RSS of the tagwarden Lambda binary, driven through the real Runtime API.

Starts moto and `cargo lambda watch --only-lambda-apis` on free loopback ports, seeds a policy and
owned instances, then for each of several cold starts: spawns the bootstrap, invokes it once
(time from spawn to the first response = cold start to the first handled event), invokes it again
without drift and with drift, and reads VmHWM (peak RSS) from /proc. Prints a small table.
"""
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


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main(bootstrap, zip_path):
    moto_port, rt_port = free_port(), free_port()
    procs = [subprocess.Popen([os.path.join(VENV, "moto_server"), "-H", "127.0.0.1", "-p", str(moto_port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        wait_port(moto_port)
        endpoint = f"http://127.0.0.1:{moto_port}"
        aws = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
        s3, ec2 = boto3.client("s3", **aws), boto3.client("ec2", **aws)
        s3.create_bucket(Bucket="policy")
        policy = {"kind": "Infrastructure", "status": {"infrastructureName": "m-1", "platformStatus": {"type": "AWS", "aws": {
            "resourceTags": [{"key": f"tag-{i:02}", "value": f"v{i}"} for i in range(25)]}}}}
        s3.put_object(Bucket="policy", Key="p.json", Body=json.dumps(policy).encode())
        image = ec2.describe_images()["Images"][0]["ImageId"]
        owned = [{"ResourceType": "instance", "Tags": [{"Key": "kubernetes.io/cluster/m-1", "Value": "owned"}]}]
        runs = 5
        ids = [i["InstanceId"] for i in ec2.run_instances(ImageId=image, MinCount=2 * runs, MaxCount=2 * runs,
                                                         TagSpecifications=owned)["Instances"]]
        fixture = open(os.path.join(ROOT, "tests/fixtures/events/aws/ec2-run-instances-sso.json")).read()
        event = lambda iid: fixture.replace("i-0123456789abcdef0", iid).replace("111122223333", "123456789012").replace("eu-west-1", "us-east-1")

        watch = subprocess.Popen([os.path.join(VENV, "cargo-lambda"), "lambda", "watch", "--only-lambda-apis",
                                  "--invoke-address", "127.0.0.1", "--invoke-port", str(rt_port)],
                                 cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(watch)
        wait_port(rt_port)
        env = {"PATH": os.environ.get("PATH", ""), "AWS_LAMBDA_RUNTIME_API": f"http://127.0.0.1:{rt_port}/.rt",
               "AWS_LAMBDA_FUNCTION_NAME": "_", "AWS_LAMBDA_FUNCTION_VERSION": "1", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
               "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "TAGWARDEN_POLICY": "s3://policy/p.json", "RUST_LOG": "warn"}
        cold, warm_drift, warm_clean, rss = [], [], [], []
        for n in range(runs):
            started = time.monotonic()
            fn = subprocess.Popen([bootstrap], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            status, body = invoke(rt_port, event(ids[2 * n]))
            cold.append((time.monotonic() - started) * 1000)
            assert status == 200, body
            t = time.monotonic(); invoke(rt_port, event(ids[2 * n])); warm_clean.append((time.monotonic() - t) * 1000)
            t = time.monotonic(); invoke(rt_port, event(ids[2 * n + 1])); warm_drift.append((time.monotonic() - t) * 1000)
            rss.append(peak_rss_kib(fn.pid) / 1024)
            fn.kill()
            fn.wait()
        size = os.path.getsize(bootstrap) / 2**20
        print(f"binary     {bootstrap}: {size:.1f} MiB" + (f", zip {os.path.getsize(zip_path) / 2**20:.1f} MiB" if zip_path else ""))
        print(f"cold start to the first handled event (drift: 1 write), median of {runs}: {statistics.median(cold):.0f} ms "
              f"(min {min(cold):.0f}, max {max(cold):.0f}); includes the policy fetch")
        print(f"warm event, no drift: {statistics.median(warm_clean):.1f} ms; warm event, drift: {statistics.median(warm_drift):.1f} ms (moto on loopback)")
        print(f"peak RSS after 3 events: {statistics.median(rss):.1f} MiB (max {max(rss):.1f})")
    finally:
        for p in procs:
            p.kill()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
