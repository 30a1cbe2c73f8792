"""The release's SBOM (scripts/lib/sbom.py) lists exactly the crates the shipped binaries link.

The SBOM reads `cargo tree`; this check asks cargo another way, for the units it would compile:
`cargo build --unit-graph` (a query, nothing is built; RUSTC_BOOTSTRAP lets stable cargo answer
it) for each shipped binary and target, walked from the binary through its library dependencies,
leaving out build scripts and proc-macros (they run at build time and are not linked). Every such
crate must be in the SBOM, and the SBOM must name no other. The document must also be valid
CycloneDX 1.5 (cyclonedx-python-lib's strict JSON validator, with the standard's schemas).

Usage: check_sbom.py   (run with .tools/venv-sbom's python; scripts/install-tools cyclonedx)
"""
import json
import os
import subprocess
import sys
import tempfile

from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts/lib"))
import sbom  # noqa: E402

TARGETS = ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"]
NOT_LINKED = {"proc-macro", "custom-build"}


def unit_graph(package, features, target):
    """name@version of `package` and every crate linked into its binary for `target`, by the unit graph."""
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    out = subprocess.run(
        ["cargo", "build", "--locked", "--release", "--unit-graph", "-Z", "unstable-options", "-p", package,
         *features, "--target", target],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    graph = json.loads(out)
    units = graph["units"]
    seen, todo, linked = set(), list(graph["roots"]), set()
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        unit = units[i]
        if NOT_LINKED & set(unit["target"]["kind"]) or unit["mode"] != "build":
            continue
        # pkg_id: "registry+https://…#name@version", "path+file:///…#version" (the name is the
        # directory's then) or "path+file:///…#name@version".
        name_version = unit["pkg_id"].rsplit("#", 1)[1]
        if "@" not in name_version:
            name_version = f"{unit['target']['name'].replace('_', '-')}@{name_version}"
        linked.add(name_version)
        todo.extend(d["index"] for d in unit["dependencies"])
    return linked


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sbom.cdx.json")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts/lib/sbom.py"), path, "0.0.0-check", *TARGETS],
                       check=True)
        text = open(path).read()
    errors = JsonStrictValidator(SchemaVersion.V1_5).validate_str(text)
    if errors:
        sys.exit(f"check_sbom: not valid CycloneDX 1.5: {errors}")
    listed = {f"{c['name']}@{c['version']}" for c in json.loads(text)["components"]}
    expected, problems = set(), []
    for package, features, only in sbom.SHIPPED:
        for target in TARGETS:
            if only is not None and target not in only:
                continue
            linked = unit_graph(package, features, target)
            expected |= linked
            missing = sorted(linked - listed)
            if missing:
                problems.append(f"{package} ({target}) links {len(missing)} crates the SBOM does not list: {missing[:10]}")
    extra = sorted(listed - expected)
    if extra:
        problems.append(f"the SBOM lists {len(extra)} crates no shipped binary links: {extra[:10]}")
    for p in problems:
        print("SBOM:", p)
    print(f"sbom check: {len(listed)} crates listed, {len(expected)} linked by the shipped binaries "
          f"({', '.join(TARGETS)}), valid CycloneDX 1.5, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
