//! The manifest of a packaged artifact, written beside it as `<artifact>.json`.
//!
//! The deployment reads it: infra/aws sets the Lambda's `architectures` from `architecture` and
//! refuses, at plan, a zip whose sha256 is not `sha256` (a rebuilt or swapped zip next to an old
//! manifest); infra/azure does the same for the Functions package. One writer for
//! scripts/package-lambda, scripts/package-azure-function, scripts/release and the Terraform
//! tests' fixtures, so the format cannot differ between them.
//!
//! The text is Python's `json.dump(manifest, indent=2, sort_keys=True)` and a newline, which the
//! earlier writer produced: sorted keys, two-space indent, every character outside printable
//! ASCII escaped as `\uXXXX`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// The Lambda/Azure architecture names and the first component of their Rust targets.
const ARCHITECTURES: &[(&str, &str)] = &[("arm64", "aarch64"), ("x86_64", "x86_64")];

/// Write `<zip>.json` for the artifact at `zip` and return that path. `repo` is the git checkout
/// whose commit is recorded; `rustc_version` is asked of `rustc --version` when `None`.
pub fn write(
    repo: &Path,
    zip: &str,
    name: &str,
    version: &str,
    arch: &str,
    rust_target: &str,
    rustc_version: Option<String>,
) -> Result<String> {
    let Some((_, target_arch)) = ARCHITECTURES.iter().find(|(a, _)| *a == arch) else {
        bail!("manifest: architecture must be arm64 or x86_64, not {arch:?}");
    };
    if !rust_target.starts_with(&format!("{target_arch}-")) {
        bail!("manifest: rust target {rust_target} is not an {arch} target");
    }
    let rustc_version = rustc_version
        .unwrap_or_else(|| stdout_of(Command::new("rustc").arg("--version")).unwrap_or_else(|| "unknown".to_owned()));
    let bytes = std::fs::read(zip).with_context(|| format!("manifest: reading {zip}"))?;
    let sha256 = Sha256::digest(&bytes).iter().fold(String::with_capacity(64), |mut hex, byte| {
        let _ = write!(hex, "{byte:02x}");
        hex
    });
    let manifest = BTreeMap::from([
        ("name", name.to_owned()),
        ("version", version.to_owned()),
        ("git_commit", git_commit(repo)),
        ("architecture", arch.to_owned()),
        ("rust_target", rust_target.to_owned()),
        ("rustc_version", rustc_version),
        ("sha256", sha256),
    ]);
    let path = format!("{zip}.json");
    std::fs::write(&path, render(&manifest)).with_context(|| format!("manifest: writing {path}"))?;
    Ok(path)
}

/// A command's standard output, trimmed; `None` when it cannot run or fails.
fn stdout_of(command: &mut Command) -> Option<String> {
    let out = command.output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// HEAD of the checkout at `repo`, "-dirty" when a tracked file has changes, "unknown" outside a
/// git checkout (or without git).
fn git_commit(repo: &Path) -> String {
    let git = |args: &[&str]| stdout_of(Command::new("git").arg("-C").arg(repo).args(args));
    match (git(&["rev-parse", "HEAD"]), git(&["status", "--porcelain", "--untracked-files=no"])) {
        (Some(head), Some(status)) if status.is_empty() => head,
        (Some(head), Some(_)) => format!("{head}-dirty"),
        _ => "unknown".to_owned(),
    }
}

/// The manifest's text: one string field a line, keys sorted, and a closing newline.
fn render(manifest: &BTreeMap<&str, String>) -> String {
    let fields: Vec<String> =
        manifest.iter().map(|(key, value)| format!("  {}: {}", json_string(key), json_string(value))).collect();
    format!("{{\n{}\n}}\n", fields.join(",\n"))
}

/// A JSON string as Python's json module writes it with `ensure_ascii` (its default): `"` and
/// `\` escaped, the five control characters with short escapes as those, every other character
/// outside ' '..='~' as `\uXXXX` in lowercase hex (beyond the BMP, a UTF-16 surrogate pair).
fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_as_pythons_json_does() {
        assert_eq!(json_string("rustc 1.95.0 (x)"), "\"rustc 1.95.0 (x)\"");
        assert_eq!(json_string("a\"b\\c\n\t"), "\"a\\\"b\\\\c\\n\\t\"");
        assert_eq!(json_string("\u{1}\u{7f}é😀"), "\"\\u0001\\u007f\\u00e9\\ud83d\\ude00\"");
    }

    #[test]
    fn the_text_is_sorted_and_indented() {
        let manifest = BTreeMap::from([("name", "n".to_owned()), ("architecture", "x".to_owned())]);
        assert_eq!(render(&manifest), "{\n  \"architecture\": \"x\",\n  \"name\": \"n\"\n}\n");
    }

    #[test]
    fn architecture_and_target_must_agree() {
        let here = Path::new(".");
        let error = write(here, "x.zip", "n", "1", "riscv", "riscv64gc-unknown-linux-gnu", None)
            .expect_err("not an architecture");
        assert!(error.to_string().contains("arm64 or x86_64"), "{error}");
        let error =
            write(here, "x.zip", "n", "1", "arm64", "x86_64-unknown-linux-gnu", None).expect_err("the wrong target");
        assert!(error.to_string().contains("is not an arm64 target"), "{error}");
    }
}
