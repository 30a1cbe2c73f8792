"""Run what we ship: a Lambda zip's bootstrap handles a real event.

    run_bootstrap.py ZIP          the zip scripts/release or scripts/package-lambda made
    run_bootstrap.py --binary B   a bootstrap binary as it is (scripts/test: the debug build)

The zip's manifest (`<zip>.json`) names the architecture; the binary's ELF header must say the
same (an arm64 zip holding an x86_64 binary fails every invocation with
Runtime.InvalidEntrypoint). An x86_64 binary runs natively, an arm64 one under Debian's qemu-aarch64-static with the
arm64 glibc (scripts/install-tools qemu_arm64), against cargo-lambda's Runtime API and moto: a
CloudTrail RunInstances event (tests/fixtures/events/aws) for an owned instance created without
the cluster's tags, which the instance carries afterwards, and the same event again, which writes
nothing. Prints one line with the architecture, how it ran and the time to the first response.
"""
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import zipfile

import boto3

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts/lib"))
from measure_lambda import VENV, free_port, invoke, start_moto, wait_port  # noqa: E402

QEMU = os.path.join(ROOT, ".tools/qemu/usr")
# ELF e_machine (little endian, offset 18): the Lambda architectures' names.
MACHINES = {0x3E: "x86_64", 0xB7: "arm64"}
HOST = {"x86_64": "x86_64", "aarch64": "arm64"}.get(platform.machine())


def elf_architecture(path):
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF":
        raise SystemExit(f"run_bootstrap: {path} is not an ELF executable")
    machine = int.from_bytes(head[18:20], "little")
    return MACHINES.get(machine, f"e_machine {machine:#x}")


def command(binary, arch):
    if arch == HOST:
        return [binary], "natively"
    if arch == "arm64":
        qemu = os.path.join(QEMU, "bin/qemu-aarch64-static")
        if not os.access(qemu, os.X_OK):
            raise SystemExit("run_bootstrap: no qemu-aarch64-static: scripts/install-tools qemu_arm64")
        return [qemu, "-L", os.path.join(QEMU, "aarch64-linux-gnu"), binary], "under qemu-aarch64-static"
    raise SystemExit(f"run_bootstrap: cannot run an {arch} binary on this {platform.machine()} machine")


def main(argv):
    with tempfile.TemporaryDirectory() as tmp:
        if argv[:1] == ["--binary"] and len(argv) == 2:
            binary = argv[1]
            arch = elf_architecture(binary)
        elif len(argv) == 1:
            zip_path = argv[0]
            with open(zip_path + ".json") as f:
                arch = json.load(f)["architecture"]
            with zipfile.ZipFile(zip_path) as z:
                z.extract("bootstrap", tmp)
            binary = os.path.join(tmp, "bootstrap")
            os.chmod(binary, 0o755)
            found = elf_architecture(binary)
            if found != arch:
                raise SystemExit(f"run_bootstrap: {zip_path}'s manifest says {arch}, its bootstrap is {found}")
        else:
            raise SystemExit(__doc__.split("\n\n")[1])
        run(binary, arch)


def run(binary, arch):
    cmd, how = command(binary, arch)
    rt_port = free_port()
    procs = []
    try:
        endpoint, aws = start_moto(procs)
        s3, ec2 = boto3.client("s3", **aws), boto3.client("ec2", **aws)
        s3.create_bucket(Bucket="policy")
        want = {"team": "platform", "cost-center": "4242"}
        policy = {"kind": "Infrastructure", "status": {"infrastructureName": "ship-1", "platformStatus": {
            "type": "AWS", "aws": {"resourceTags": [{"key": k, "value": v} for k, v in want.items()]}}}}
        s3.put_object(Bucket="policy", Key="infrastructure.json", Body=json.dumps(policy).encode())
        image = ec2.describe_images()["Images"][0]["ImageId"]
        owned = [{"ResourceType": "instance", "Tags": [{"Key": "kubernetes.io/cluster/ship-1", "Value": "owned"}]}]
        iid = ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, TagSpecifications=owned)["Instances"][0]["InstanceId"]
        fixture = open(os.path.join(ROOT, "tests/fixtures/events/aws/ec2-run-instances-sso.json")).read()
        event = (fixture.replace("i-0123456789abcdef0", iid).replace("111122223333", "123456789012")
                 .replace("eu-west-1", "us-east-1"))

        procs.append(subprocess.Popen([os.path.join(VENV, "cargo-lambda"), "lambda", "watch", "--only-lambda-apis",
                                       "--invoke-address", "127.0.0.1", "--invoke-port", str(rt_port)],
                                      cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_port(rt_port)
        env = {"PATH": os.environ.get("PATH", ""), "AWS_LAMBDA_RUNTIME_API": f"http://127.0.0.1:{rt_port}/.rt",
               "AWS_LAMBDA_FUNCTION_NAME": "_", "AWS_LAMBDA_FUNCTION_VERSION": "1",
               "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128", "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
               "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "TAGWARDEN_POLICY": "s3://policy/infrastructure.json", "RUST_LOG": "info"}
        log = tempfile.TemporaryFile()
        started = time.monotonic()
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
        status, body = invoke(rt_port, event)
        first_ms = (time.monotonic() - started) * 1000
        tags = {t["Key"]: t["Value"] for t in ec2.describe_tags(
            Filters=[{"Name": "resource-id", "Values": [iid]}])["Tags"]}
        again_status, again = invoke(rt_port, event)
        log.seek(0)
        output = log.read().decode(errors="replace")
        problems = []
        if status != 200:
            problems.append(f"the first event answered {status}: {body}")
        if any(tags.get(k) != v for k, v in want.items()):
            problems.append(f"the instance carries {tags}, not the policy's {want}")
        if again_status != 200:
            problems.append(f"the event again answered {again_status}: {again}")
        if problems:
            print(output[-4000:], file=sys.stderr)
            raise SystemExit("run_bootstrap: " + "; ".join(problems))
        print(f"run what we ship: {arch} bootstrap ({os.path.getsize(binary) / 2**20:.1f} MiB) {how}: "
              f"RunInstances event handled, {len(want)} tags written, first response after {first_ms:.0f} ms; "
              f"the same event again answered {again_status}")
    finally:
        for p in procs:
            p.kill()


if __name__ == "__main__":
    main(sys.argv[1:])
