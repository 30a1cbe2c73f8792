"""Write the manifest of a packaged function beside its zip: `<zip>.json`.

    python3 scripts/lib/artifact_manifest.py ZIP NAME VERSION ARCHITECTURE RUST_TARGET [RUSTC_VERSION]

The deployment reads it: infra/aws sets the Lambda's `architectures` from
`architecture` and refuses, at plan, a zip whose sha256 is not `sha256` (a rebuilt or swapped zip
next to an old manifest); infra/azure does the same for the Functions package. One writer for
scripts/package-lambda, scripts/package-azure-function and the Terraform test harness, so the
format cannot differ between them.

Fields: name, version, git_commit (HEAD, "-dirty" when the work tree has changes, "unknown" outside
a git checkout), architecture (arm64 | x86_64, the Lambda/Azure names), rust_target, rustc_version
(`rustc --version`, or the argument), sha256 (hex of the zip, as Terraform's filesha256 prints it).
"""
import hashlib
import json
import subprocess
import sys

ARCHITECTURES = {"arm64": "aarch64", "x86_64": "x86_64"}


def git_commit(cwd):
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def main(argv):
    if len(argv) not in (6, 7):
        sys.exit(__doc__.split("\n\n")[1])
    zip_path, name, version, arch, target = argv[1:6]
    if arch not in ARCHITECTURES:
        sys.exit(f"artifact_manifest: architecture must be one of {sorted(ARCHITECTURES)}, not {arch!r}")
    if not target.startswith(ARCHITECTURES[arch] + "-"):
        sys.exit(f"artifact_manifest: rust target {target} is not an {arch} target")
    if len(argv) == 7:
        rustc = argv[6]
    else:
        try:
            rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            rustc = "unknown"
    with open(zip_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    manifest = {
        "name": name,
        "version": version,
        "git_commit": git_commit(sys.path[0]),
        "architecture": arch,
        "rust_target": target,
        "rustc_version": rustc,
        "sha256": digest,
    }
    with open(zip_path + ".json", "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    print(zip_path + ".json")


if __name__ == "__main__":
    main(sys.argv)
