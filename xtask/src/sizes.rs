//! The Rust source files over [`LIMIT`] lines. A file that long usually holds more than one
//! thing; the few that are one cohesive thing (a port of a table, a format) are on [`ALLOWED`],
//! each with its reason.

use std::path::Path;

use anyhow::{Context, Result};

/// Longer than this many lines, a file must be on [`ALLOWED`].
pub const LIMIT: usize = 600;

/// The directories searched, from the repository's root: the layer crates, the root package's
/// library and CLI, the functions (their tests under crates/*/tests count too).
pub const DIRS: &[&str] = &["crates", "src", "functions"];

/// The files allowed over [`LIMIT`] lines: (path from the repository's root, why it is one piece).
pub const ALLOWED: &[(&str, &str)] = &[
    (
        "crates/testkit/src/kube_api/mod.rs",
        "the fake Kubernetes API server: one port of its HTTP protocol (lists, watches, Status errors, RBAC denials)",
    ),
    (
        "crates/testkit/src/azure/fake.rs",
        "the fake ARM: one port of the Tags, Resource Graph, managed identity and metrics APIs tagwarden calls",
    ),
    (
        "crates/testkit/src/kube_api/crd.rs",
        "a CRD's structural schema as the API server applies it: pruning, defaulting, OpenAPI and CEL validation",
    ),
    (
        "crates/testkit/src/aws/strict.rs",
        "the strict layer in front of moto: one port of what AWS refuses and moto accepts (tag rules, IAM, session policies)",
    ),
];

/// Every .rs file under [`DIRS`] with more than [`LIMIT`] lines: (path from `root`, `/`-separated;
/// lines), longest first, then by path.
pub fn oversized(root: &Path) -> Result<Vec<(String, usize)>> {
    let mut found = Vec::new();
    for dir in DIRS {
        walk(root, &root.join(dir), &mut found)?;
    }
    found.sort_by(|(a_path, a_lines), (b_path, b_lines)| b_lines.cmp(a_lines).then_with(|| a_path.cmp(b_path)));
    Ok(found)
}

fn walk(root: &Path, dir: &Path, found: &mut Vec<(String, usize)>) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    for entry in entries {
        let path = entry.with_context(|| format!("reading {}", dir.display()))?.path();
        if path.is_dir() {
            walk(root, &path, found)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let lines = line_count(&text);
            if lines > LIMIT {
                let relative = path.strip_prefix(root).unwrap_or(&path);
                let name: Vec<String> =
                    relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                found.push((name.join("/"), lines));
            }
        }
    }
    Ok(())
}

/// Lines as an editor counts them: a last line without its newline is a line.
pub fn line_count(text: &[u8]) -> usize {
    let newlines = text.iter().filter(|&&b| b == b'\n').count();
    newlines + usize::from(!text.is_empty() && !text.ends_with(b"\n"))
}

/// What `--check` refuses: a file over the limit not on the allowlist, and an allowlist entry
/// that is no longer over it (so the list stays short and true).
pub fn check(found: &[(String, usize)], allowed: &[(&str, &str)]) -> Vec<String> {
    let mut problems: Vec<String> = found
        .iter()
        .filter(|(path, _)| !allowed.iter().any(|(allowed, _)| allowed == path))
        .map(|(path, lines)| {
            format!(
                "{path} has {lines} lines, over {LIMIT}: split it, or allow it in ALLOWED (xtask/src/sizes.rs) with the reason it is one piece"
            )
        })
        .collect();
    problems.extend(allowed.iter().filter(|(allowed, _)| !found.iter().any(|(path, _)| path == allowed)).map(
        |(allowed, _)| {
            format!("{allowed} is allowed over {LIMIT} lines but is not over them (any more): take it off ALLOWED")
        },
    ));
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory of this test's own, removed at the end.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("xtask-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("scratch directory");
            Scratch(dir)
        }

        fn file(&self, path: &str, lines: usize) {
            let full = self.0.join(path);
            std::fs::create_dir_all(full.parent().expect("a parent")).expect("directories");
            std::fs::write(full, "x\n".repeat(lines)).expect("write");
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn files_over_the_limit_under_the_three_directories_are_found() {
        let scratch = Scratch::new("sizes");
        scratch.file("crates/a/src/big.rs", 601);
        scratch.file("crates/a/src/limit.rs", 600);
        scratch.file("crates/a/tests/bigger.rs", 900);
        scratch.file("src/cli/long.rs", 700);
        scratch.file("functions/f/src/main.rs", 10);
        scratch.file("functions/f/src/notes.txt", 1000);
        scratch.file("tests/outside.rs", 1000);
        let found = oversized(&scratch.0).expect("readable");
        assert_eq!(
            found,
            vec![
                ("crates/a/tests/bigger.rs".to_owned(), 900),
                ("src/cli/long.rs".to_owned(), 700),
                ("crates/a/src/big.rs".to_owned(), 601),
            ]
        );
    }

    #[test]
    fn the_check_wants_each_long_file_allowed_and_each_allowed_file_long() {
        let found = vec![("crates/a/src/big.rs".to_owned(), 900), ("src/port.rs".to_owned(), 700)];
        assert!(check(&[], &[]).is_empty());
        assert!(check(&found, &[("crates/a/src/big.rs", "one table"), ("src/port.rs", "one port")]).is_empty());
        let problems = check(&found, &[("src/port.rs", "one port"), ("src/gone.rs", "split")]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("crates/a/src/big.rs has 900 lines"));
        assert!(problems[1].starts_with("src/gone.rs is allowed"));
    }

    #[test]
    fn a_last_line_without_newline_counts() {
        assert_eq!(line_count(b""), 0);
        assert_eq!(line_count(b"a\nb\n"), 2);
        assert_eq!(line_count(b"a\nb"), 2);
    }
}
