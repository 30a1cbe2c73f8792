"""The stand-ins of the executed README path (run.py): what moto or this machine cannot do. Each is
called by a two-line wrapper that run.py writes first on PATH (`oc`, `cargo`, `aws`), or between
the documented commands (`s3-deliver`); run.py's docstring says what each stands in for and why.

    standins.py oc ARGS...        the cluster: `oc get infrastructure cluster -o yaml|jsonpath=...`,
                                  `oc patch infrastructure cluster --type merge -p ...` (day 2)
    standins.py cargo ARGS...     the two builds: `cargo lambda build ...` (inside scripts/package-lambda)
                                  and `cargo install --path . --locked`; the machine's cargo runs
                                  package-lambda's `cargo xtask manifest`
    standins.py aws ARGS...       the real AWS CLI, except `aws lambda invoke`: the deployed function run
    standins.py s3-deliver        S3's Object Created notifications to Lambda
    standins.py sqs-deliver       Lambda's SQS event source mappings (the organization hub's queues)
    standins.py snapshot FILE     no stand-in: what moto holds (run.py's checks), between two blocks
    standins.py probe LABEL       no stand-in: the owned resources' tags after each command (run.py's counts)

Settings (run.py sets them): DOCTEST_WORK, DOCTEST_INFRASTRUCTURE, DOCTEST_CLI, DOCTEST_BOOTSTRAP,
DOCTEST_AWS, DOCTEST_CARGO_LAMBDA, DOCTEST_PACKAGES, DOCTEST_CLONE, DOCTEST_MACHINE_PATH, DOCTEST_REGIONS, DOCTEST_OWNED, DOCTEST_REGION, and the AWS settings every tool reads
(AWS_ENDPOINT_URL, AWS_CA_BUNDLE, TAGWARDEN_CA_BUNDLE, credentials).
"""
import base64
import datetime
import glob
import hashlib
import json
import os
import platform
import queue
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile

# ELF e_machine of the Lambda architectures (System V ABI): what `cargo lambda build --x86-64 |
# --arm64` produces, and what a function of that architecture can run.
ELF_MACHINES = {"x86_64": 0x3E, "arm64": 0xB7}
HOST_ARCH = {"x86_64": "x86_64", "aarch64": "arm64"}.get(platform.machine())


def fail(msg, code=1):
    print(f"doc-test stand-in: {msg}", file=sys.stderr)
    sys.exit(code)


def record(kind, **fields):
    """One line per stand-in call in DOCTEST_WORK/standins.jsonl, which run.py checks."""
    with open(os.path.join(os.environ["DOCTEST_WORK"], "standins.jsonl"), "a") as f:
        f.write(json.dumps({"standin": kind, **fields}) + "\n")


def elf_arch(path):
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF":
        return None
    machine = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
    return next((a for a, m in ELF_MACHINES.items() if m == machine), f"e_machine {machine:#x}")


# --- oc ---------------------------------------------------------------------------------------------


def jsonpath(obj, template):
    """kubectl's JSONPath for what the docs use: `{.a.b.c}` field paths and `{"..."}` string literals
    (a missing field prints nothing, as with kubectl's default --allow-missing-template-keys)."""
    out, rest = [], template
    while rest:
        if not rest.startswith("{"):
            cut = rest.find("{")
            cut = len(rest) if cut < 0 else cut
            out.append(rest[:cut])
            rest = rest[cut:]
            continue
        end = rest.find("}")
        if end < 0:
            fail(f"oc: unclosed jsonpath expression in {template!r}")
        expr, rest = rest[1:end], rest[end + 1:]
        if expr.startswith('"'):
            out.append(json.loads(expr))
        elif expr.startswith(".") and all(p and p.replace("-", "").replace("_", "").isalnum() for p in expr[1:].split(".")):
            v = obj
            for p in expr[1:].split("."):
                v = v.get(p) if isinstance(v, dict) else None
            if v is not None:
                out.append(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))
        else:
            fail(f"oc: the stand-in knows field paths and string literals, not {{{expr}}}: extend standins.py if the docs need it")
    return "".join(out)


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (`oc patch --type merge`): objects merged, null deletes, anything
    else (lists included) replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def json_patch(target, ops):
    """RFC 6902 `add` and `replace` (`oc patch --type json`), the two a tag edit needs: `add` at a
    list's `-` appends, at an index inserts; any other op fails, naming itself."""
    import copy

    doc = copy.deepcopy(target)
    for op in ops:
        kind, path = op.get("op"), op.get("path", "")
        if kind not in ("add", "replace"):
            fail(f"oc patch --type json: the stand-in applies add and replace, not {kind!r}")
        parts = [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent.get(p)
            if parent is None:
                fail(f"oc patch --type json: {path}: no such parent (The Kubernetes API answers 422)")
        last = parts[-1]
        if isinstance(parent, list):
            if last == "-":
                parent.append(op["value"])
            elif kind == "add":
                parent.insert(int(last), op["value"])
            else:
                parent[int(last)] = op["value"]
        else:
            parent[last] = op["value"]
    return doc


def oc_patch(fixture, rest):
    """`oc patch infrastructure cluster [--subresource=status] --type merge|json -p JSON` (also
    `--type=…`, `--patch`): the cluster's day-2 edit, applied to the Infrastructure object the
    stand-in serves. As the API server does: without `--subresource=status` a change to `status` is
    not stored (the main resource ignores it), with it only `status` is."""
    import yaml

    opts, rest = {}, list(rest)
    while rest:
        a = rest.pop(0)
        name, eq, val = a.partition("=")
        if name in ("--type", "-p", "--patch", "--subresource") and not eq:
            if not rest:
                fail(f"oc patch: {a} without a value")
            val = rest.pop(0)
        if name in ("-p", "--patch"):
            opts["patch"] = val
        elif name in ("--type", "--subresource"):
            opts[name[2:]] = val
        else:
            fail(f"oc patch: the stand-in takes --subresource status, --type merge|json and -p/--patch, not {a!r}")
    if opts.get("type") not in ("merge", "json") or "patch" not in opts or opts.get("subresource", "status") != "status":
        fail("oc patch infrastructure cluster: the stand-in applies `[--subresource=status] --type merge|json -p JSON` only")
    before = yaml.safe_load(open(fixture).read())
    patch = json.loads(opts["patch"])
    patched = merge_patch(before, patch) if opts["type"] == "merge" else json_patch(before, patch)
    if opts.get("subresource") == "status":
        obj = dict(before, status=patched.get("status"))
    else:
        obj = dict(patched, status=before.get("status"))
    with open(fixture, "w") as f:
        yaml.safe_dump(obj, f, sort_keys=False)
    record("oc", args=["patch", "infrastructure", "cluster", *rest], patch=opts["patch"])
    print("infrastructure.config.openshift.io/cluster patched")


def oc(args):
    import yaml

    fixture = os.environ["DOCTEST_INFRASTRUCTURE"]
    if args[:3] == ["patch", "infrastructure", "cluster"]:
        return oc_patch(fixture, args[3:])
    fmt = None
    if args[:3] == ["get", "infrastructure", "cluster"]:
        rest = args[3:]
        if len(rest) == 2 and rest[0] == "-o":
            fmt = rest[1]
        elif len(rest) == 1 and rest[0].startswith("-o"):
            fmt = rest[0][2:].lstrip("=")
    if fmt is None:
        fail(f"oc {' '.join(args)}: the stand-in answers `oc get infrastructure cluster -o yaml|jsonpath=...` and "
             "`oc patch infrastructure cluster [--subresource=status] --type merge|json -p ...` only")
    text = open(fixture).read()
    if fmt == "yaml":
        out = text
    elif fmt.startswith("jsonpath="):
        out = jsonpath(yaml.safe_load(text), fmt[len("jsonpath="):])
    else:
        fail(f"oc: output format {fmt!r} is not stood in (yaml, jsonpath=...)")
    record("oc", args=args)
    sys.stdout.write(out)


# --- cargo ------------------------------------------------------------------------------------------


def cargo(args):
    prebuilt_cli, prebuilt_bootstrap = os.environ["DOCTEST_CLI"], os.environ["DOCTEST_BOOTSTRAP"]
    if args[:2] == ["lambda", "build"]:
        # scripts/package-lambda's build: `cargo lambda build --release --locked --compiler cargo
        # --x86-64|--arm64 -p tagwarden-aws-lambda --output-format binary`, whose binary it takes
        # from $CARGO_TARGET_DIR/lambda/bootstrap/bootstrap.
        flags = args[2:]
        need = ["--release", "--locked", "-p", "tagwarden-aws-lambda", "--output-format", "binary"]
        if any(f not in flags for f in need):
            fail(f"cargo {' '.join(args)}: not the release build of tagwarden-aws-lambda as a binary ({need})")
        archs = [a for f, a in (("--x86-64", "x86_64"), ("--arm64", "arm64")) if f in flags]
        if len(archs) != 1:
            fail(f"cargo {' '.join(args)}: exactly one of --x86-64, --arm64")
        have = elf_arch(prebuilt_bootstrap)
        if have != archs[0]:
            fail(f"cargo lambda build for {archs[0]}: the prebuilt bootstrap {prebuilt_bootstrap} is {have}; "
                 "this stand-in builds nothing")
        target = os.environ.get("CARGO_TARGET_DIR") or fail("cargo lambda build: CARGO_TARGET_DIR is not set")
        out = os.path.join(target, "lambda", "bootstrap")
        os.makedirs(out, exist_ok=True)
        shutil.copy2(prebuilt_bootstrap, os.path.join(out, "bootstrap"))
        record("cargo lambda build", arch=archs[0], bootstrap=prebuilt_bootstrap)
        print(f"doc-test stand-in: {prebuilt_bootstrap} ({archs[0]}) as {out}/bootstrap", file=sys.stderr)
        return
    if args == ["install", "--path", ".", "--locked"]:
        # cargo installs the package at `.` (this must be the clone's root, the tagwarden package)
        # into $CARGO_INSTALL_ROOT, else $CARGO_HOME, else ~/.cargo: bin/tagwarden.
        manifest = open("Cargo.toml").read() if os.path.exists("Cargo.toml") else ""
        if 'name = "tagwarden"' not in manifest:
            fail("cargo install --path .: the current directory is not the tagwarden package")
        root = os.environ.get("CARGO_INSTALL_ROOT") or os.environ.get("CARGO_HOME") or os.path.expanduser("~/.cargo")
        os.makedirs(os.path.join(root, "bin"), exist_ok=True)
        shutil.copy2(prebuilt_cli, os.path.join(root, "bin", "tagwarden"))
        record("cargo install", root=root, cli=prebuilt_cli)
        print(f"doc-test stand-in: installed {prebuilt_cli} as {root}/bin/tagwarden", file=sys.stderr)
        return
    if args[:4] == ["--quiet", "--locked", "xtask", "manifest"]:
        # scripts/package-lambda's manifest beside the zip: the repository's own tool (xtask/), not a
        # build of what the guide deploys, so the machine's cargo runs it as written. It builds
        # xtask into CARGO_TARGET_DIR (seconds: a few small crates, already fetched by the tests).
        done = subprocess.run(["cargo", *args], env={**os.environ, "PATH": os.environ["DOCTEST_MACHINE_PATH"]})
        record("cargo xtask manifest", args=args[4:])
        sys.exit(done.returncode)
    fail(f"cargo {' '.join(args)}: not stood in (only `cargo lambda build`, `cargo install --path . --locked` "
         "and `cargo xtask manifest`)", 101)


# --- the deployed function ---------------------------------------------------------------------------


def boto(service, region):
    import boto3

    return boto3.client(service, region_name=region, endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                        verify=os.environ["AWS_CA_BUNDLE"], aws_access_key_id="testing", aws_secret_access_key="testing")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# How long cargo-lambda's Runtime API may take to listen (it is started per invocation): long, for
# a machine under load (scripts/test runs this under `nice -n 19` beside the cargo builds).
RUNTIME_READY_S = float(os.environ.get("DOCTEST_RUNTIME_READY_S", "120"))


def wait_listening(host, port, deadline, proc, what):
    """Until a TCP connection to host:port succeeds; fails, naming `what`, if `proc` exits first or
    the deadline (time.monotonic()) passes."""
    last = None
    while True:
        try:
            with socket.create_connection((host, port), timeout=2):
                return
        except OSError as e:
            last = e
        if proc.poll() is not None:
            fail(f"{what}: cargo lambda watch exited ({proc.returncode}) before {host}:{port} accepted a connection "
                 f"({last}; function.log)")
        if time.monotonic() > deadline:
            fail(f"{what}: nothing listening on {host}:{port} after {RUNTIME_READY_S:.0f} s ({last}); "
                 "DOCTEST_RUNTIME_READY_S sets the wait; cargo-lambda's output is in function.log")
        time.sleep(0.05)


def invoke_deployed(function, region, payload):
    """Run the function Terraform created, as Lambda would, on `payload`: its code is the package
    whose sha256 moto holds for it (CodeSha256), unzipped; its environment is the one moto holds for
    it (GetFunctionConfiguration), plus what Lambda adds (region, name, memory, the execution role's
    credentials); the Runtime API is cargo-lambda's. Returns (ok, response text)."""
    import botocore.exceptions

    try:
        cfg = boto("lambda", region).get_function_configuration(FunctionName=function)
    except botocore.exceptions.ClientError as e:  # as the AWS CLI says it
        err = e.response["Error"]
        fail(f"\nAn error occurred ({err['Code']}) when calling the Invoke operation: {err['Message']}", 255)
    name = cfg["FunctionName"]
    problems = [f"{k} is {cfg.get(k)!r}, not {v!r}" for k, v in
                (("Runtime", "provided.al2023"), ("Handler", "bootstrap"), ("PackageType", "Zip")) if cfg.get(k) != v]
    if cfg.get("Architectures") != [HOST_ARCH]:
        problems.append(f"its architecture {cfg.get('Architectures')} cannot run on this {HOST_ARCH} machine")
    packages = {}
    for z in glob.glob(os.path.join(os.environ["DOCTEST_PACKAGES"], "*.zip")):
        packages[base64.b64encode(hashlib.sha256(open(z, "rb").read()).digest()).decode()] = z
    package = packages.get(cfg.get("CodeSha256"))
    if not package:
        problems.append(f"its code (CodeSha256 {cfg.get('CodeSha256')}) is none of the packages built here {sorted(packages.values())}")
    if problems:
        fail(f"function {name} in {region}: " + "; ".join(problems))
    task = os.path.join(os.environ["DOCTEST_WORK"], "lambda-task", cfg["CodeSha256"].replace("/", "_"))
    if not os.path.exists(os.path.join(task, "bootstrap")):
        with zipfile.ZipFile(package) as z:
            z.extract("bootstrap", task)
        os.chmod(os.path.join(task, "bootstrap"), 0o755)
    creds = boto("sts", region).assume_role(RoleArn=cfg["Role"], RoleSessionName=name)["Credentials"]
    env = {
        # What Lambda sets (Lambda Developer Guide, "Defined runtime environment variables").
        "PATH": "/usr/local/bin:/usr/bin:/bin", "LAMBDA_TASK_ROOT": task,
        "AWS_LAMBDA_FUNCTION_NAME": name, "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(cfg.get("MemorySize", 128)),
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{name}", "AWS_EXECUTION_ENV": "AWS_Lambda_provided.al2023",
        "AWS_REGION": region, "AWS_DEFAULT_REGION": region,
        "AWS_ACCESS_KEY_ID": creds["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
        "AWS_SESSION_TOKEN": creds["SessionToken"],
        # Stand-in: AWS's endpoints and certificate chain are moto's.
        "AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"], "TAGWARDEN_CA_BUNDLE": os.environ["TAGWARDEN_CA_BUNDLE"],
        **{k: os.environ[k] for k in ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY") if k in os.environ},
        # The function's own configuration, as Terraform wrote it.
        **cfg.get("Environment", {}).get("Variables", {}),
    }
    port = free_port()
    log = open(os.path.join(os.environ["DOCTEST_WORK"], "function.log"), "a")
    log.write(f"--- {name} ({region}) invoked with {payload}\n")
    log.flush()
    watch = subprocess.Popen([os.environ["DOCTEST_CARGO_LAMBDA"], "lambda", "watch", "--only-lambda-apis",
                              "--invoke-address", "127.0.0.1", "--invoke-port", str(port)],
                             cwd=os.environ["DOCTEST_CLONE"], stdout=subprocess.PIPE, stderr=log, text=True,
                             # Lambda's runtime, not a documented command: the machine's cargo (for
                             # its `cargo metadata`), not the stand-in.
                             env={**os.environ, "PATH": os.environ["DOCTEST_MACHINE_PATH"]})
    # Everything cargo-lambda prints goes to function.log, read on a thread of its own: a pipe left
    # unread would block it once full, and a line that never comes must not block this.
    lines = queue.Queue()

    def pump():
        for line in watch.stdout:
            log.write(line)
            log.flush()
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    fn = None
    try:
        deadline = time.monotonic() + RUNTIME_READY_S
        runtime_api, started = None, False
        while not started:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                fail(f"cargo lambda watch printed no \"starting Runtime server\" within {RUNTIME_READY_S:.0f} s "
                     "(DOCTEST_RUNTIME_READY_S; its output is in function.log)")
            if line is None:
                fail(f"cargo lambda watch exited ({watch.wait()}) before starting its Runtime server (function.log)")
            line = re.sub(r"\x1b\[[0-9;]*m", "", line)
            if "AWS_LAMBDA_RUNTIME_API=" in line:
                runtime_api = line.split("AWS_LAMBDA_RUNTIME_API=")[1].strip()
            started = "starting Runtime server" in line
        if not runtime_api:
            fail("cargo lambda watch printed no AWS_LAMBDA_RUNTIME_API")
        # cargo-lambda logs "starting Runtime server" before it binds the port (the log line, then
        # TcpListener::bind): on a loaded machine the function's first GET .../next and the invoke
        # POST below found nothing listening yet (connection refused). So: wait until the port
        # accepts a connection, up to the deadline.
        api = urllib.parse.urlsplit(runtime_api if "://" in runtime_api else "http://" + runtime_api)
        wait_listening(api.hostname, api.port or 80, deadline, watch, "cargo lambda watch's Runtime API")
        if api.port != port:
            wait_listening("127.0.0.1", port, deadline, watch, "cargo lambda watch's invoke server")
        fn = subprocess.Popen([os.path.join(task, "bootstrap")], cwd=task, env={**env, "AWS_LAMBDA_RUNTIME_API": runtime_api},
                              stdout=log, stderr=log)
        req = urllib.request.Request(f"http://127.0.0.1:{port}/2015-03-31/functions/_/invocations",
                                     data=payload.encode(), method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=cfg.get("Timeout", 60) + 10) as r:
                ok, body = True, r.read().decode()
        except urllib.error.HTTPError as e:
            ok, body = False, e.read().decode()
    finally:
        for p in (fn, watch):
            if p:
                p.kill()
                p.wait()
        reader.join(timeout=10)
        log.close()
    record("lambda invoke", function=name, region=region, payload=payload, ok=ok, response=body,
           code_sha256=cfg["CodeSha256"], package=package, environment=cfg.get("Environment", {}).get("Variables", {}),
           architectures=cfg.get("Architectures"), role=cfg["Role"])
    return ok, body


def region_of(function, default):
    return function.split(":")[3] if function.startswith("arn:") else default


def aws(args):
    if args[:2] != ["lambda", "invoke"]:
        # The AWS CLI v2 (the one the docs name) takes its region from AWS_REGION ("Environment
        # variables to configure the AWS CLI"); the pinned one here is v1 (v2 is not on PyPI),
        # which reads only AWS_DEFAULT_REGION: given the same value, as v2 would read it.
        if os.environ.get("AWS_REGION") and not os.environ.get("AWS_DEFAULT_REGION"):
            os.environ["AWS_DEFAULT_REGION"] = os.environ["AWS_REGION"]
        os.execv(os.environ["DOCTEST_AWS"], [os.environ["DOCTEST_AWS"], *args])
    # `aws lambda invoke --function-name F [--region R] [--cli-binary-format raw-in-base64-out]
    # --payload P OUTFILE`: prints {"StatusCode": 200, ...} as the AWS CLI does, the response into OUTFILE.
    opts, outfile, rest = {}, None, args[2:]
    while rest:
        a = rest.pop(0)
        if a.startswith("--"):
            if not rest:
                fail(f"aws lambda invoke: {a} without a value")
            opts[a[2:]] = rest.pop(0)
        elif outfile is None:
            outfile = a
        else:
            fail(f"aws lambda invoke: a second outfile {a!r}")
    unknown = set(opts) - {"function-name", "region", "cli-binary-format", "payload"}
    if unknown or "function-name" not in opts or outfile is None:
        fail(f"aws lambda invoke {' '.join(args[2:])}: the stand-in takes --function-name, --payload, "
             f"--cli-binary-format, --region and OUTFILE (unknown: {sorted(unknown)})")
    payload = opts.get("payload", "{}")
    if opts.get("cli-binary-format") != "raw-in-base64-out":
        # The AWS CLI v2 reads --payload as base64 unless told otherwise; v1 reads it raw. The docs
        # must work with either.
        fail("aws lambda invoke: a raw JSON --payload needs --cli-binary-format raw-in-base64-out (AWS CLI v2)")
    region = opts.get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        fail("aws lambda invoke: no region (--region, AWS_REGION)")
    ok, body = invoke_deployed(opts["function-name"], region_of(opts["function-name"], region), payload)
    with open(outfile, "w") as f:
        f.write(body)
    meta = {"StatusCode": 200, "ExecutedVersion": "$LATEST"}
    if not ok:
        meta["FunctionError"] = "Unhandled"
    print(json.dumps(meta, indent=4))


# --- S3 notifications ----------------------------------------------------------------------------------


def matches(rules, key):
    for r in rules:
        v = r["Value"]
        if r["Name"].lower() == "prefix" and not key.startswith(v):
            return False
        if r["Name"].lower() == "suffix" and not key.endswith(v):
            return False
    return True


def s3_deliver():
    """Deliver what S3 would have: for each object version written since the last call, in a bucket
    whose notification configuration sends s3:ObjectCreated:* to a Lambda function under a
    matching filter, the S3 event message (S3 User Guide, "Event message structure", version 2.1)
    to that function, if its resource policy lets s3.amazonaws.com invoke it from that bucket. Until
    nothing new is delivered: a function that writes an object its own notification matches would
    loop here as it would on AWS (bounded)."""
    seen_file = os.path.join(os.environ["DOCTEST_WORK"], "s3-delivered.json")
    seen = set(json.load(open(seen_file))) if os.path.exists(seen_file) else set()
    s3 = boto("s3", "us-east-1")
    failed = []
    for round_ in range(5):
        delivered = 0
        for b in s3.list_buckets().get("Buckets", []):
            bucket = b["Name"]
            region = s3.get_bucket_location(Bucket=bucket).get("LocationConstraint") or "us-east-1"
            configs = boto("s3", region).get_bucket_notification_configuration(Bucket=bucket).get("LambdaFunctionConfigurations", [])
            if not configs:
                continue
            versions = boto("s3", region).list_object_versions(Bucket=bucket).get("Versions", [])
            for v in versions:
                ident = f"{bucket}/{v['Key']}@{v.get('VersionId')}"
                if ident in seen:
                    continue
                seen.add(ident)
                for c in configs:
                    if not any(e in ("s3:ObjectCreated:*", "s3:ObjectCreated:Put") for e in c["Events"]):
                        continue
                    if not matches(c.get("Filter", {}).get("Key", {}).get("FilterRules", []), v["Key"]):
                        continue
                    fn = c["LambdaFunctionArn"]
                    fn_region = region_of(fn, region)
                    policy = json.loads(boto("lambda", fn_region).get_policy(FunctionName=fn)["Policy"])
                    allowed = any(
                        s.get("Effect") == "Allow" and s.get("Principal", {}).get("Service") == "s3.amazonaws.com"
                        and s.get("Condition", {}).get("ArnLike", {}).get("AWS:SourceArn") == f"arn:aws:s3:::{bucket}"
                        for s in policy.get("Statement", []))
                    if not allowed:
                        failed.append(f"S3 may not invoke {fn} for {bucket} (no s3.amazonaws.com permission with that source ARN)")
                        continue
                    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
                    event = {"Records": [{
                        "eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": region, "eventTime": now,
                        "eventName": "ObjectCreated:Put", "userIdentity": {"principalId": "AWS:DOCTEST"},
                        "requestParameters": {"sourceIPAddress": "127.0.0.1"}, "responseElements": {},
                        "s3": {"s3SchemaVersion": "1.0", "configurationId": c.get("Id", ""),
                               "bucket": {"name": bucket, "ownerIdentity": {"principalId": "DOCTEST"}, "arn": f"arn:aws:s3:::{bucket}"},
                               "object": {"key": v["Key"], "size": v.get("Size", 0), "eTag": v.get("ETag", "").strip('"'),
                                          "versionId": v.get("VersionId"), "sequencer": format(int(time.time() * 1e6), "X")}}}]}
                    ok, body = invoke_deployed(fn, fn_region, json.dumps(event))
                    delivered += 1
                    print(f"doc-test stand-in: S3 delivered Object Created {bucket}/{v['Key']} to {fn}: {body}", file=sys.stderr)
                    if not ok:
                        failed.append(f"{fn} failed on Object Created {bucket}/{v['Key']}: {body}")
        json.dump(sorted(seen), open(seen_file, "w"))
        if not delivered:
            break
    else:
        failed.append("S3 notifications still being delivered after 5 rounds: a function re-triggering itself")
    if failed:
        fail("; ".join(failed))


# --- SQS event source mappings ------------------------------------------------------------------------


def sqs_deliver():
    """Deliver what Lambda's SQS event source mappings would have (moto holds the mappings and never
    polls): for each enabled mapping of a queue, in each of DOCTEST_REGIONS, messages received up to
    its BatchSize and handed to its function as Lambda's SQS event ("Using Lambda with Amazon SQS":
    Records of messageId, receiptHandle, body, attributes, md5OfBody, eventSource "aws:sqs",
    eventSourceARN, awsRegion), in one invocation a batch; deleted when the function succeeded,
    except those its `batchItemFailures` name when the mapping has ReportBatchItemFailures. Until
    every mapped queue is empty (a shard may send more): bounded, as a loop would be on AWS."""
    failed = []
    for round_ in range(50):
        delivered = 0
        for region in os.environ["DOCTEST_REGIONS"].split(","):
            lam, sqs = boto("lambda", region), boto("sqs", region)
            for m in pages(lam, "list_event_source_mappings", "EventSourceMappings"):
                arn = m.get("EventSourceArn", "")
                if not arn.startswith("arn:aws:sqs:") or m.get("State", "Enabled") not in ("Enabled", "Creating", "Updating"):
                    continue
                _, _, _, q_region, q_account, q_name = arn.split(":")
                url = sqs.get_queue_url(QueueName=q_name, QueueOwnerAWSAccountId=q_account)["QueueUrl"]
                batch = []
                while len(batch) < m.get("BatchSize", 10):
                    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=min(10, m.get("BatchSize", 10) - len(batch)),
                                              AttributeNames=["All"], MessageAttributeNames=["All"], VisibilityTimeout=600).get("Messages", [])
                    if not got:
                        break
                    batch += got
                if not batch:
                    continue
                event = {"Records": [{
                    "messageId": msg["MessageId"], "receiptHandle": msg["ReceiptHandle"], "body": msg["Body"],
                    "attributes": msg.get("Attributes", {}), "messageAttributes": msg.get("MessageAttributes", {}),
                    "md5OfBody": msg["MD5OfBody"], "eventSource": "aws:sqs", "eventSourceARN": arn, "awsRegion": q_region}
                    for msg in batch]}
                fn = m["FunctionArn"]
                ok, body = invoke_deployed(fn, region_of(fn, region), json.dumps(event))
                delivered += 1
                print(f"doc-test stand-in: SQS delivered {len(batch)} message(s) of {q_name} to {fn}: {body[:300]}", file=sys.stderr)
                keep = set()
                if ok and "ReportBatchItemFailures" in m.get("FunctionResponseTypes", []):
                    try:
                        keep = {f["itemIdentifier"] for f in (json.loads(body) or {}).get("batchItemFailures", [])}
                    except (ValueError, AttributeError):
                        failed.append(f"{fn}: a response that is not JSON for {q_name}: {body[:300]}")
                if not ok:
                    failed.append(f"{fn} failed on a batch of {q_name}: {body[:500]}")
                    keep = {msg["MessageId"] for msg in batch}
                for msg in batch:
                    if msg["MessageId"] in keep:
                        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"], VisibilityTimeout=0)
                    else:
                        sqs.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
                if keep and ok:
                    failed.append(f"{fn} reported {len(keep)} item failure(s) on {q_name}: {body[:500]}")
        if not delivered or failed:
            break
    else:
        failed.append("SQS messages still being delivered after 50 rounds")
    if failed:
        fail("; ".join(failed))


# --- what moto holds ---------------------------------------------------------------------------------------
# Every service the provider override gives an endpoint (what Terraform can create things in), plus
# EC2 and the Tagging API (the cluster's resources and the tags written). Listed as "service kind id"
# strings; tags as "... tag key=value".

INVENTORIED = {"cloudtrail", "cloudwatch", "events", "iam", "kms", "lambda", "logs", "s3", "sns", "sqs", "ssm", "sts"}


def pages(client, op, key, **kw):
    if client.can_paginate(op):
        for page in client.get_paginator(op).paginate(**kw):
            yield from page.get(key, [])
    else:
        yield from getattr(client, op)(**kw).get(key, [])


def inventory(regions):
    out = set()
    add = lambda *parts: out.add(" ".join(str(p) for p in parts))
    iam, s3 = boto("iam", "us-east-1"), boto("s3", "us-east-1")
    for r in pages(iam, "list_roles", "Roles"):
        add("iam role", r["Arn"])
    for p in pages(iam, "list_policies", "Policies", Scope="Local"):
        add("iam policy", p["Arn"])
    for u in pages(iam, "list_users", "Users"):
        add("iam user", u["Arn"])
    for p in pages(iam, "list_instance_profiles", "InstanceProfiles"):
        add("iam instance-profile", p["Arn"])
    for p in iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]:
        add("iam oidc", p["Arn"])
    for b in s3.list_buckets().get("Buckets", []):
        add("s3 bucket", b["Name"], s3.get_bucket_location(Bucket=b["Name"]).get("LocationConstraint") or "us-east-1")
        for v in pages(s3, "list_object_versions", "Versions", Bucket=b["Name"]):
            add("s3 object", b["Name"], v["Key"], v.get("VersionId"))
    for region in regions:
        c = lambda s: boto(s, region)
        lam, ev, cw = c("lambda"), c("events"), c("cloudwatch")
        for f in pages(lam, "list_functions", "Functions"):
            add(region, "lambda function", f["FunctionName"])
        for m in pages(lam, "list_event_source_mappings", "EventSourceMappings"):
            add(region, "lambda mapping", m["UUID"], m.get("EventSourceArn"))
        for q in c("sqs").list_queues().get("QueueUrls", []):
            add(region, "sqs queue", q)
        for t in pages(c("sns"), "list_topics", "Topics"):
            add(region, "sns topic", t["TopicArn"])
        for s in pages(c("sns"), "list_subscriptions", "Subscriptions"):
            add(region, "sns subscription", s["TopicArn"], s["Protocol"], s["Endpoint"])
        for bus in ev.list_event_buses()["EventBuses"]:
            add(region, "events bus", bus["Name"])
            for rule in pages(ev, "list_rules", "Rules", EventBusName=bus["Name"]):
                add(region, "events rule", bus["Name"], rule["Name"])
                for t in ev.list_targets_by_rule(Rule=rule["Name"], EventBusName=bus["Name"])["Targets"]:
                    add(region, "events target", rule["Name"], t["Arn"])
        for a in pages(cw, "describe_alarms", "MetricAlarms"):
            add(region, "cloudwatch alarm", a["AlarmName"])
        for a in pages(cw, "describe_alarms", "CompositeAlarms"):
            add(region, "cloudwatch composite-alarm", a["AlarmName"])
        for d in pages(cw, "list_dashboards", "DashboardEntries"):
            add(region, "cloudwatch dashboard", d["DashboardName"])
        for g in pages(c("logs"), "describe_log_groups", "logGroups"):
            add(region, "logs group", g["logGroupName"])
        kms = c("kms")
        for k in pages(kms, "list_keys", "Keys"):
            add(region, "kms key", k["KeyId"], kms.describe_key(KeyId=k["KeyId"])["KeyMetadata"]["KeyState"])
        for p in pages(c("ssm"), "describe_parameters", "Parameters"):
            add(region, "ssm parameter", p["Name"])
        for t in c("cloudtrail").describe_trails()["trailList"]:
            add(region, "cloudtrail trail", t["TrailARN"])
        for t in pages(c("ec2"), "describe_tags", "Tags"):
            add(region, "ec2 tag", t["ResourceId"], f"{t['Key']}={t['Value']}")
        for res in pages(c("resourcegroupstaggingapi"), "get_resources", "ResourceTagMappingList"):
            add(region, "tagged", res["ResourceARN"])
            for t in res.get("Tags", []):
                add(region, "tagged", res["ResourceARN"], f"{t['Key']}={t['Value']}")
    return out




def probe(args):
    """`probe LABEL`: after each documented command, the tags the cluster's owned resources
    (DOCTEST_OWNED, in DOCTEST_REGION) carry, as one line of DOCTEST_WORK/probe.jsonl: run.py finds
    in them the command that first corrected them."""
    ids = os.environ["DOCTEST_OWNED"].split(",")
    tags = {i: {} for i in ids}
    for t in pages(boto("ec2", os.environ["DOCTEST_REGION"]), "describe_tags", "Tags",
                   Filters=[{"Name": "resource-id", "Values": ids}]):
        tags[t["ResourceId"]][t["Key"]] = t["Value"]
    with open(os.path.join(os.environ["DOCTEST_WORK"], "probe.jsonl"), "a") as f:
        f.write(json.dumps({"after": args[0], "tags": tags}) + "\n")


def snapshot(args):
    """`snapshot FILE`: the inventory of DOCTEST_REGIONS, as JSON, for run.py's checks."""
    json.dump(sorted(inventory(os.environ["DOCTEST_REGIONS"].split(","))), open(args[0], "w"), indent=0)


if __name__ == "__main__":
    what, argv = sys.argv[1], sys.argv[2:]
    {"oc": oc, "cargo": cargo, "aws": aws, "s3-deliver": lambda _: s3_deliver(), "sqs-deliver": lambda _: sqs_deliver(), "snapshot": snapshot,
     "probe": probe}[what](argv)
