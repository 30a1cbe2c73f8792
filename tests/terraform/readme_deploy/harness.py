"""What the executed guides share (run.py: the one-account guide; organization.py: the
organization guide): the tools they need, a work directory and its cleanup, moto over TLS with a CA
made here, a copy of the repository as a clone has it, the shell's environment (the stand-ins first
on PATH, the login's credentials and nothing else), and the session that runs the blocks and types
"yes" at Terraform's confirmation prompt, and only there. Imported; its settings are run.py's
(usage there).
"""
import datetime
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import standins  # noqa: E402

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
TOOLS = os.path.join(ROOT, ".tools")
PY = os.path.join(TOOLS, "venv", "bin", "python")
results = []
# The layout the upgrade starts from: the guides' blocks before their upgrade run on the
# Terraform (infra/) of this commit, and the upgrade block on this tree's, as a `git checkout` of
# the new release would leave it (terraform.tfvars, state and .terraform kept). No release is
# published yet: this is the commit before the policy and trail buckets moved into
# modules/private_bucket (moved blocks); once a release exists, its tag. A clone without that
# commit (a shallow checkout) upgrades from this tree's own layout, and says so.
PREVIOUS_LAYOUT = os.environ.get("DOCTEST_PREVIOUS_LAYOUT", "8b8bf683784a927714321a156a4465259470d426")


def check(name, ok, why=""):
    results.append((name, ok))
    print(("PASS " if ok else "FAIL ") + name + ("" if ok or not why else f": {why}"), flush=True)
    return ok


def die(msg):
    print(f"FAIL {msg}")
    sys.exit(1)


# --- what is needed -----------------------------------------------------------------------------------

cli, bootstrap = os.environ.get("TAGWARDEN_CLI", ""), os.environ.get("TAGWARDEN_BOOTSTRAP", "")
for what, path in (("TAGWARDEN_CLI", cli), ("TAGWARDEN_BOOTSTRAP", bootstrap)):
    if not (path and os.access(path, os.X_OK)):
        die(f"{what}={path!r} is not an executable: scripts/test keeps both from its cargo test --workspace --all-features in $CARGO_TARGET_DIR/readme-path/")
if subprocess.run([cli, "publish", "--help"], capture_output=True).returncode != 0:
    die(f"TAGWARDEN_CLI={cli} has no `publish`: it was built without the aws feature (cargo build --bin tagwarden --features aws)")
aws_cli = os.path.join(TOOLS, "venv-awscli", "bin", "aws")
cargo_lambda = os.path.join(TOOLS, "venv", "bin", "cargo-lambda")
for tool in (aws_cli, cargo_lambda):
    if not os.access(tool, os.X_OK):
        die(f"{tool} is missing: scripts/install-tools awscli cargo_lambda")
mirror = os.environ.get("TF_PLUGIN_MIRROR") or open(os.path.join(TOOLS, "tf-plugin-mirror")).read().strip()
for tool in ("terraform", "jq", "git"):
    if not shutil.which(tool):
        die(f"{tool} is not on PATH (the documented commands use it)")

work = tempfile.mkdtemp(prefix="tagwarden-readme-deploy.")
procs = []


def cleanup():
    for p in procs:  # each leads its own process group: moto; the shell and whatever it left running
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    if os.environ.get("KEEP_WORK") == "1":
        print(f"work directory kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


# --- moto, over TLS, with a certificate a CA made here signs -------------------------------------------


def make_pki():
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tagwarden doc test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = lambda c: c.public_bytes(serialization.Encoding.PEM)
    paths = {n: os.path.join(work, n) for n in ("ca.pem", "moto.pem", "moto.key")}
    open(paths["ca.pem"], "wb").write(pem(ca))
    open(paths["moto.pem"], "wb").write(pem(cert))
    open(paths["moto.key"], "wb").write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption()))
    return paths


def make_clone():
    """The repository's files as a fresh clone has them (tracked, plus new files not ignored: the
    work tree under test), without .terraform/, target-lambda/ or state. .tools is linked, as in a
    developer's worktree, so scripts/package-lambda's own install-tools call finds cargo-lambda."""
    clone = os.path.join(work, "clone")
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = os.path.join(ROOT, f)
        if os.path.isfile(src) and not os.path.islink(src) and not f.startswith(".tools"):
            os.makedirs(os.path.dirname(os.path.join(clone, f)), exist_ok=True)
            shutil.copy2(src, os.path.join(clone, f))
    os.symlink(os.path.realpath(TOOLS), os.path.join(clone, ".tools"))
    return clone


def start_moto(regions):
    """moto_server over TLS on a free port: (pki paths, endpoint). standins.boto reads the settings
    this puts in os.environ."""
    pki = make_pki()
    port = standins.free_port()
    endpoint = f"https://127.0.0.1:{port}"
    os.environ.update({"AWS_ENDPOINT_URL": endpoint, "AWS_CA_BUNDLE": pki["ca.pem"], "DOCTEST_REGIONS": ",".join(regions)})
    moto_log = open(os.path.join(work, "moto.log"), "w")
    procs.append(subprocess.Popen([PY, os.path.join(ROOT, "tests/terraform/moto/moto_server.py"), "-H", "127.0.0.1",
                                   "-p", str(port), "-c", pki["moto.pem"], "-k", pki["moto.key"]],
                                  stdout=moto_log, stderr=subprocess.STDOUT, start_new_session=True))
    for _ in range(300):
        try:
            standins.boto("sts", "us-east-1").get_caller_identity()
            break
        except Exception:
            time.sleep(0.1)
    else:
        die("moto did not start (moto.log)")

    return pki, endpoint


def shell_env(pki, endpoint, clone, extra):
    """The documented commands' shell: (env, hooks directory). `extra`: the stand-ins' settings
    that differ per guide (DOCTEST_INFRASTRUCTURE, DOCTEST_OWNED, DOCTEST_REGION, ...)."""
    # The shell: stand-ins first on PATH, then the install root, then the machine's PATH without
    # any directory that already holds a `tagwarden`.
    bin_dir, hooks, install_root = os.path.join(work, "standins"), os.path.join(work, "hooks"), os.path.join(work, "cargo-install")
    for d, tools in ((bin_dir, ("oc", "cargo", "aws")), (hooks, ("s3-deliver", "sqs-deliver", "snapshot", "probe"))):
        os.makedirs(d)
        for tool in tools:
            open(os.path.join(d, tool), "w").write(f'#!/bin/sh\nexec "{PY}" "{os.path.join(HERE, "standins.py")}" {tool} "$@"\n')
            os.chmod(os.path.join(d, tool), 0o755)
    machine_path = [d for d in os.environ["PATH"].split(os.pathsep) if d and not os.path.exists(os.path.join(d, "tagwarden"))]
    tfrc = os.path.join(work, "terraformrc")
    open(tfrc, "w").write(f'disable_checkpoint = true\nprovider_installation {{\n  filesystem_mirror {{\n    path = "{mirror}"\n  }}\n}}\n')
    empty = os.path.join(work, "empty")
    open(empty, "w").close()
    keep = ("HOME", "USER", "LANG", "TERM", "TMPDIR", "RUSTUP_HOME", "CARGO_HOME", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY",
            "https_proxy", "http_proxy", "no_proxy")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update({
        "PATH": os.pathsep.join([bin_dir, os.path.join(install_root, "bin")] + machine_path),
        "CARGO_INSTALL_ROOT": install_root, "CARGO_TARGET_DIR": os.path.join(work, "cargo-target"),
        # The login: credentials, and nothing else (no region, no profile).
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": empty, "AWS_SHARED_CREDENTIALS_FILE": empty,
        # AWS's endpoints and certificate chain.
        "AWS_ENDPOINT_URL": endpoint, "AWS_CA_BUNDLE": pki["ca.pem"], "TAGWARDEN_CA_BUNDLE": pki["ca.pem"],
        "TF_CLI_CONFIG_FILE": tfrc, "CHECKPOINT_DISABLE": "1",
        # For the stand-ins.
        "DOCTEST_WORK": work, "DOCTEST_CLONE": clone, "DOCTEST_CLI": cli,
        "DOCTEST_BOOTSTRAP": bootstrap, "DOCTEST_AWS": aws_cli, "DOCTEST_CARGO_LAMBDA": cargo_lambda,
        "DOCTEST_PACKAGES": os.path.join(clone, "target-lambda"), "DOCTEST_MACHINE_PATH": os.pathsep.join(machine_path),
    })
    env.update(extra)
    return env, hooks


def run_session(script, clone, env, deadline_s):
    """Runs `script` (lines) in one bash in `clone`: (its output, confirmations typed, why it was
    stopped or None, seconds). Output goes to work/session.log as it comes."""
    open(os.path.join(work, "session.sh"), "w").write("\n".join(script) + "\n")
    log = open(os.path.join(work, "session.log"), "wb")
    t0 = time.monotonic()
    sh = subprocess.Popen(["bash", os.path.join(work, "session.sh")], cwd=clone, env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    procs.append(sh)
    out, typed, stopped = b"", 0, None
    while True:
        if time.monotonic() - t0 > deadline_s:
            stopped = f"no end after {deadline_s} s"
            break
        ready, _, _ = select.select([sh.stdout], [], [], 1)
        if not ready:
            if sh.poll() is not None:
                break
            continue
        chunk = os.read(sh.stdout.fileno(), 65536)
        if not chunk:
            break
        out += chunk
        log.write(chunk)
        log.flush()
        tail = re.sub(r"\x1b\[[0-9;]*m", "", out[-3000:].decode(errors="replace"))
        if tail.rstrip().endswith("Enter a value:"):
            if "Only 'yes' will be accepted" not in tail:
                stopped = "terraform asked for a value the docs do not give:\n" + tail[-800:]
                break
            sh.stdin.write(b"yes\n")
            sh.stdin.flush()
            out += b"yes\n"
            log.write(b"yes  <- typed by the doc test\n")
            typed += 1
    if stopped:
        os.killpg(sh.pid, signal.SIGKILL)
    sh.wait()
    session_s = time.monotonic() - t0
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.decode(errors="replace"))
    return text, typed, stopped, session_s


def previous_layout(clone, commit):
    """infra/ of `clone` as `commit` has it, until the upgrade: (the shell lines that check out this
    tree's infra/ as a new release's checkout would leave it, with terraform.tfvars, state and
    .terraform kept and the files the new layout dropped removed; what the upgrade starts from).
    A clone without that commit (a shallow checkout) upgrades from this tree's own layout."""
    import shlex

    if subprocess.run(["git", "-C", ROOT, "cat-file", "-e", commit + "^{commit}"], capture_output=True).returncode != 0:
        return [], "this tree's own layout (%s is not in this clone: a shallow checkout)" % commit[:12]
    new_infra = os.path.join(work, "layout-new")
    shutil.copytree(os.path.join(clone, "infra"), os.path.join(new_infra, "infra"))
    new_files = {os.path.relpath(os.path.join(d, f), clone) for d, _, fs in os.walk(os.path.join(clone, "infra")) for f in fs}
    old_files = set(subprocess.run(["git", "-C", ROOT, "ls-tree", "-r", "--name-only", commit, "infra"],
                                   capture_output=True, check=True, text=True).stdout.split())
    shutil.rmtree(os.path.join(clone, "infra"))
    tar = subprocess.run(["git", "-C", ROOT, "archive", commit, "infra"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", clone], input=tar, check=True)
    lines = ["echo; echo '@@ checkout of the new release (infra/ of this tree)'"]
    lines += [f"rm -f -- {shlex.quote(os.path.join(clone, f))}" for f in sorted(old_files - new_files)]
    lines.append(f"cp -R {shlex.quote(os.path.join(new_infra, 'infra'))}/. {shlex.quote(os.path.join(clone, 'infra'))}/ || exit 1")
    return lines, f"{commit[:12]}'s layout"
