"""Write the CycloneDX 1.5 SBOM of what a release ships: every crate a shipped binary
links, for each of its targets.

    python3 scripts/lib/sbom.py OUT.cdx.json VERSION TARGET... 

The crates come from cargo itself: `cargo tree -e normal,no-proc-macro --target T` for each
shipped binary (the Lambda's bootstrap, the Azure Function's handler, the CLI with the features
its release build turns on), so build scripts, proc-macros and dev-dependencies, which are not
linked, are left out. Licences come from `cargo metadata`, hashes from Cargo.lock's checksums (the
sha256 of the .crate crates.io served). The document is reproducible: its serial number is derived
from the commit and its timestamp is the commit's (SOURCE_DATE_EPOCH when set).
"""
import datetime
import json
import os
import re
import subprocess
import sys
import tomllib
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What scripts/release builds: (package, cargo tree's feature arguments, the targets it ships for).
SHIPPED = [
    ("tagwarden-aws-lambda", [], None),
    ("tagwarden-azure-function", [], {"x86_64-unknown-linux-gnu"}),
    ("tagwarden", ["--no-default-features", "--features", "aws,azure,kube"], None),
]

LINE = re.compile(r"^(?P<name>[A-Za-z0-9_-]+) v(?P<version>\S+)(?: \((?P<path>/[^)]*)\))?(?: \(\*\))?$")


def run(*args):
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=True).stdout


def linked(package, features, target):
    """(name, version, local) of every crate `package`'s binary links on `target`."""
    out = run("cargo", "tree", "--locked", "-p", package, *features, "-e", "normal,no-proc-macro",
              "--target", target, "--prefix", "none", "--format", "{p}")
    found = set()
    for line in out.splitlines():
        m = LINE.match(line.strip())
        if not m:
            raise SystemExit(f"sbom: cannot read cargo tree's line {line!r}")
        found.add((m["name"], m["version"], m["path"] is not None))
    return found


def purl(name, version):
    return f"pkg:cargo/{name}@{version}"


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__.split("\n\n")[1])
    out_path, version, targets = argv[1], argv[2], argv[3:]
    meta = json.loads(run("cargo", "metadata", "--locked", "--format-version", "1", "--all-features"))
    licences = {(p["name"], p["version"]): p.get("license") for p in meta["packages"]}
    with open(os.path.join(ROOT, "Cargo.lock"), "rb") as f:
        checksums = {(p["name"], p["version"]): p.get("checksum") for p in tomllib.load(f)["package"]}

    crates, shipped_by = {}, {}
    for package, features, only in SHIPPED:
        for target in targets:
            if only is not None and target not in only:
                continue
            for name, ver, local in linked(package, features, target):
                crates[(name, ver)] = local
                shipped_by.setdefault((name, ver), set()).add(f"{package} ({target})")

    components = []
    for (name, ver), local in sorted(crates.items()):
        c = {"type": "library", "bom-ref": purl(name, ver), "name": name, "version": ver}
        if not local:
            c["purl"] = purl(name, ver)
        licence = licences.get((name, ver))
        if licence:
            c["licenses"] = [{"expression": licence}]
        checksum = checksums.get((name, ver))
        if checksum:
            c["hashes"] = [{"alg": "SHA-256", "content": checksum}]
        c["properties"] = [{"name": "tagwarden:linked-by", "value": ", ".join(sorted(shipped_by[(name, ver)]))}]
        components.append(c)

    commit = run("git", "rev-parse", "HEAD").strip()
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or run("git", "log", "-1", "--format=%ct").strip())
    stamp = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'tagwarden/{version}/{commit}')}",
        "version": 1,
        "metadata": {
            "timestamp": stamp,
            "component": {
                "type": "application",
                "bom-ref": f"tagwarden@{version}",
                "name": "tagwarden",
                "version": version,
                "properties": [{"name": "tagwarden:git-commit", "value": commit},
                               {"name": "tagwarden:targets", "value": " ".join(targets)}],
            },
        },
        "components": components,
    }
    with open(out_path, "w") as f:
        json.dump(bom, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"sbom: {len(components)} crates linked by the shipped binaries for {', '.join(targets)} -> {out_path}",
          file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
