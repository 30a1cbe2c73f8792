//! The house's shape: file import cycles inside each crate, the direction between the layer
//! crates, and the lines of non-test source at a revision.
//!
//! Inside a crate, imports are `crate::`/`super::` paths outside comments and test modules,
//! resolved to the longest module prefix that is a file. This is a reading of the text, not of
//! the compiler's name resolution: an inline `mod` is part of its file, and `use` of a
//! re-exported name counts for the file that re-exports it. Between crates the compiler refuses a
//! cycle; the layers' direction (no crate depends on one of its own layer or above) is checked
//! here against the crates' manifests.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// A library or binary source file of the house: every .rs under src/, crates/*/src/ and
/// functions/*/src/ (paths relative to the repository's root, `/`-separated).
pub fn is_source(path: &str) -> bool {
    if !path.ends_with(".rs") {
        return false;
    }
    if path.starts_with("src/") {
        return true;
    }
    let Some(rest) = path.strip_prefix("crates/").or_else(|| path.strip_prefix("functions/")) else {
        return false;
    };
    match rest.split_once('/') {
        Some((name, rest)) => !name.is_empty() && rest.starts_with("src/"),
        None => false,
    }
}

/// The lines of a file without its `#[cfg(test)] mod … { … }` blocks (braces counted per line,
/// from the `mod` line to the line that closes it).
pub fn without_tests(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let test_mod = lines[i].trim() == "#[cfg(test)]"
            && lines.get(i + 1).is_some_and(|next| next.trim_start().starts_with("mod "));
        if !test_mod {
            out.push(lines[i]);
            i += 1;
            continue;
        }
        let (mut depth, mut started) = (0i64, false);
        let mut j = i + 1;
        while j < lines.len() {
            let line = lines[j];
            depth += count(line, '{') - count(line, '}');
            started = started || line.contains('{');
            j += 1;
            if started && depth <= 0 {
                break;
            }
        }
        i = j;
    }
    out
}

fn count(line: &str, c: char) -> i64 {
    line.chars().filter(|&x| x == c).count() as i64
}

/// A module's place: its crate's directory ("" for the root package) and its path in the crate.
type Module = Vec<String>;

/// The module a library file defines; `None` for binaries (src/bin/, the functions), whose
/// imports are not the library's.
fn module_of(path: &str) -> Option<Module> {
    let (root, rest) = match path.split_once("/src/") {
        Some((root, rest)) => (root, rest),
        None => ("", path.strip_prefix("src/")?),
    };
    let mut parts: Vec<&str> = rest.strip_suffix(".rs")?.split('/').collect();
    if parts[0] == "bin" || root.starts_with("functions") {
        return None;
    }
    if matches!(parts.last(), Some(&("mod" | "lib" | "main"))) {
        parts.pop();
    }
    let mut module = vec![root.to_owned()];
    module.extend(parts.into_iter().map(str::to_owned));
    Some(module)
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `crate` or `super` starts at byte `i` of `code`, at a word boundary.
fn base_at(code: &str, i: usize) -> Option<&'static str> {
    if code[..i].chars().next_back().is_some_and(is_word) {
        return None;
    }
    ["crate", "super"].into_iter().find(|base| code[i..].starts_with(base))
}

/// `use super::{a, b::c}` names `super::a` and `super::b::c` (one level of braces: a group that
/// holds another is left as it is).
fn expand_groups(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while let Some(c) = code[i..].chars().next() {
        if let Some(base) = base_at(code, i) {
            let open = i + base.len() + "::{".len();
            if code[i + base.len()..].starts_with("::{") {
                let inner = &code[open..];
                if let Some(end) = inner.find(['{', '}']).filter(|&e| inner[e..].starts_with('}')) {
                    let names: Vec<String> = inner[..end]
                        .split(',')
                        .map(str::trim)
                        .filter(|name| !name.is_empty())
                        .map(|name| format!("{base}::{name}"))
                        .collect();
                    out.push_str(&names.join(" "));
                    i = open + end + 1;
                    continue;
                }
            }
        }
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// Every `crate::a::b` and `super::a::b` path in `code`: (base, [a, b]).
fn paths(code: &str) -> Vec<(&'static str, Vec<&str>)> {
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(c) = code[i..].chars().next() {
        if let Some(base) = base_at(code, i) {
            let (mut j, mut segments) = (i + base.len(), Vec::new());
            while let Some(rest) = code[j..].strip_prefix("::") {
                let len = rest
                    .char_indices()
                    .find(|&(k, c)| !(c.is_ascii_alphabetic() || c == '_' || (k > 0 && c.is_ascii_digit())))
                    .map_or(rest.len(), |(k, _)| k);
                if len == 0 {
                    break;
                }
                segments.push(&rest[..len]);
                j += 2 + len;
            }
            if !segments.is_empty() {
                found.push((base, segments));
                i = j;
                continue;
            }
        }
        i += c.len_utf8();
    }
    found
}

/// The file import cycles among `files` ((path, text), in `git ls-files` order): each cycle is
/// a strongly connected component of more than one file, its paths sorted; the cycles sorted.
pub fn cycles(files: &[(String, String)]) -> Vec<Vec<String>> {
    // Later files win a shared module (src/main.rs over src/lib.rs), as in a map built in order.
    let mut mods: HashMap<Module, usize> = HashMap::new();
    for (n, (path, _)) in files.iter().enumerate() {
        if let Some(module) = module_of(path) {
            mods.insert(module, n);
        }
    }
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); files.len()];
    for (n, (path, text)) in files.iter().enumerate() {
        let Some(module) = module_of(path) else {
            continue;
        };
        let code: Vec<&str> = without_tests(text).into_iter().filter(|line| !line.trim().starts_with("//")).collect();
        let code = expand_groups(&code.join("\n"));
        for (base, rest) in paths(&code) {
            let segments: Vec<String> = if base == "super" {
                let parent = &module[..module.len() - 1];
                parent.iter().cloned().chain(rest.iter().map(|s| (*s).to_owned())).collect()
            } else {
                std::iter::once(module[0].clone()).chain(rest.iter().map(|s| (*s).to_owned())).collect()
            };
            // The longest prefix that is a file's module.
            let target = (1..=segments.len()).rev().find_map(|k| mods.get(&segments[..k]));
            if let Some(&target) = target {
                if target != n {
                    edges[n].insert(target);
                }
            }
        }
    }
    let mut found: Vec<Vec<String>> = strongly_connected(&edges)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let mut paths: Vec<String> = component.iter().map(|&v| files[v].0.clone()).collect();
            paths.sort();
            paths
        })
        .collect();
    found.sort();
    found
}

/// Tarjan's strongly connected components of a graph given as each vertex's successors.
fn strongly_connected(edges: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct Tarjan<'a> {
        edges: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        next: usize,
        components: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        // Recursive: the depth is at most the number of source files of the house.
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in self.edges[v].iter() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(index) if self.on_stack[w] => self.low[v] = self.low[v].min(index),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                self.components.push(component);
            }
        }
    }
    let n = edges.len();
    let mut tarjan = Tarjan {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        next: 0,
        components: Vec::new(),
    };
    for v in 0..n {
        if tarjan.index[v].is_none() {
            tarjan.visit(v);
        }
    }
    tarjan.components
}

fn git(root: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new("git").arg("-C").arg(root).args(args).output().context("running git")?;
    if !out.status.success() {
        bail!("git {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    let text = String::from_utf8(out.stdout).with_context(|| format!("git {}: not UTF-8", args.join(" ")))?;
    Ok(universal_newlines(text))
}

/// Line ends as the project's Python tools read text (CRLF and CR as LF).
fn universal_newlines(text: String) -> String {
    if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text
    }
}

/// The house's source files in the work tree: those git tracks (`git ls-files`) that exist.
pub fn working_tree(root: &Path) -> Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    for path in git(root, &["ls-files", "-z"])?.split('\0') {
        let full = root.join(path);
        if !is_source(path) || !full.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&full).with_context(|| format!("reading {}", full.display()))?;
        files.push((path.to_owned(), universal_newlines(text)));
    }
    Ok(files)
}

/// The non-blank lines of non-test source of the house at `rev`.
pub fn lines_at(root: &Path, rev: &str) -> Result<usize> {
    let mut total = 0;
    for path in git(root, &["ls-tree", "-r", "-z", "--name-only", rev])?.split('\0') {
        if !is_source(path) {
            continue;
        }
        let text = git(root, &["show", &format!("{rev}:{path}")])?;
        total += without_tests(&text).into_iter().filter(|line| !line.trim().is_empty()).count();
    }
    Ok(total)
}

/// Where a workspace crate stands. A crate may depend (as a normal or build dependency) only on
/// crates of a lower layer; the test and build tooling stands outside the layers and is a
/// dev-dependency only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Place {
    Layer(u8),
    Tooling,
}

/// The layers, as the architecture page of the book lays them out ("Layout"): the pure core, the
/// engine over it, each cloud's crate and the cluster side over the engine, and the binaries (the
/// CLI and its facade, the functions) on top.
pub const PLACES: &[(&str, Place)] = &[
    ("tagwarden-core", Place::Layer(0)),
    ("tagwarden-engine", Place::Layer(1)),
    ("tagwarden-aws", Place::Layer(2)),
    ("tagwarden-azure", Place::Layer(2)),
    ("tagwarden-gcp", Place::Layer(2)),
    ("tagwarden-cluster", Place::Layer(2)),
    ("tagwarden", Place::Layer(3)),
    ("tagwarden-aws-lambda", Place::Layer(3)),
    ("tagwarden-azure-function", Place::Layer(3)),
    ("tagwarden-gcp-function", Place::Layer(3)),
    ("tagwarden-testkit", Place::Tooling),
    ("xtask", Place::Tooling),
];

/// A workspace crate and the workspace crates it depends on, each with whether that is only a
/// dev-dependency.
#[derive(Debug)]
pub struct Crate {
    pub name: String,
    pub depends_on: Vec<(String, bool)>,
}

/// The workspace's crates, as `cargo metadata` reads their manifests (no resolution, no network).
pub fn workspace_crates(root: &Path) -> Result<Vec<Crate>> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1", "--manifest-path"])
        .arg(root.join("Cargo.toml"))
        .output()
        .context("running cargo metadata")?;
    if !out.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).context("reading cargo metadata's output")?;
    crates_of(&metadata)
}

/// The crates of `cargo metadata --no-deps` output, with their dependencies on each other.
pub fn crates_of(metadata: &serde_json::Value) -> Result<Vec<Crate>> {
    let packages = metadata["packages"].as_array().context("cargo metadata: no packages")?;
    let names: BTreeSet<&str> = packages.iter().filter_map(|package| package["name"].as_str()).collect();
    let mut crates = Vec::new();
    for package in packages {
        let name = package["name"].as_str().context("cargo metadata: a package without a name")?;
        let mut depends_on: BTreeMap<String, bool> = BTreeMap::new();
        for dependency in package["dependencies"].as_array().into_iter().flatten() {
            let Some(dep) = dependency["name"].as_str().filter(|d| names.contains(d)) else {
                continue;
            };
            let dev_only = dependency["kind"].as_str() == Some("dev");
            // Named as both a normal and a dev-dependency: a normal one.
            let entry = depends_on.entry(dep.to_owned()).or_insert(dev_only);
            *entry = *entry && dev_only;
        }
        crates.push(Crate { name: name.to_owned(), depends_on: depends_on.into_iter().collect() });
    }
    Ok(crates)
}

fn place_of(name: &str) -> Option<Place> {
    PLACES.iter().find(|(crate_name, _)| *crate_name == name).map(|(_, place)| *place)
}

/// The crates in no place, and the dependencies against the layers' direction.
pub fn layer_findings(crates: &[Crate]) -> Vec<String> {
    let mut findings = Vec::new();
    for krate in crates {
        let Some(place) = place_of(&krate.name) else {
            findings.push(format!("{} is in no layer: place it in PLACES (xtask/src/house.rs)", krate.name));
            continue;
        };
        for (dep, dev_only) in &krate.depends_on {
            let wrong = match (place, place_of(dep)) {
                (_, None) => continue, // reported as a crate of its own
                (_, Some(Place::Tooling)) => !dev_only,
                (Place::Layer(own), Some(Place::Layer(theirs))) => !dev_only && theirs >= own,
                (Place::Tooling, Some(Place::Layer(_))) => false,
            };
            if wrong {
                findings.push(format!(
                    "{} ({}) depends on {} ({})",
                    krate.name,
                    describe(place),
                    dep,
                    place_of(dep).map_or("?".to_owned(), describe)
                ));
            }
        }
    }
    findings
}

fn describe(place: Place) -> String {
    match place {
        Place::Layer(n) => format!("layer {n}"),
        Place::Tooling => "tooling, a dev-dependency only".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> Vec<(String, String)> {
        files.iter().map(|(path, text)| ((*path).to_owned(), (*text).to_owned())).collect()
    }

    #[test]
    fn sources_are_the_crates_library_and_binary_files() {
        assert!(is_source("src/main.rs"));
        assert!(is_source("crates/core/src/policy/mod.rs"));
        assert!(is_source("functions/aws-lambda/src/main.rs"));
        assert!(!is_source("crates/core/tests/policy.rs"));
        assert!(!is_source("tests/aws/main.rs"));
        assert!(!is_source("xtask/src/main.rs"));
        assert!(!is_source("crates//src/a.rs"));
        assert!(!is_source("crates/core/src/README.md"));
    }

    #[test]
    fn a_cycle_between_two_files_of_a_crate_is_found() {
        let files = tree(&[
            ("crates/a/src/lib.rs", "pub mod x;\npub mod y;\npub mod z;\n"),
            ("crates/a/src/x.rs", "use crate::y::Y;\npub struct X;\n"),
            // Through a group and `super`: y names x and z.
            ("crates/a/src/y.rs", "use super::{x::X, z};\npub struct Y;\n"),
            ("crates/a/src/z.rs", "pub struct Z;\n"),
        ]);
        assert_eq!(cycles(&files), vec![vec!["crates/a/src/x.rs", "crates/a/src/y.rs"]]);
    }

    #[test]
    fn a_tree_without_cycle_has_none() {
        // Imports only downward; the upward ones are in a comment and a test module, which do
        // not count, and the same paths in another crate are that crate's.
        let files = tree(&[
            ("crates/a/src/lib.rs", "pub mod x;\npub mod y;\n"),
            ("crates/a/src/x.rs", "// use crate::y::Y;\npub struct X;\n"),
            (
                "crates/a/src/y.rs",
                "use crate::x::X;\n#[cfg(test)]\nmod tests {\n    use crate::y;\n    fn f() { let _ = crate::lib; }\n}\n",
            ),
            ("crates/b/src/lib.rs", "pub mod x;\n"),
            ("crates/b/src/x.rs", "use crate::y;\n"),
            ("src/main.rs", "use tagwarden::x;\n"),
        ]);
        assert!(cycles(&files).is_empty());
    }

    #[test]
    fn a_test_module_is_left_out_up_to_its_closing_brace() {
        let text = "a\n#[cfg(test)]\nmod tests {\n    fn f() {\n    }\n}\nb";
        assert_eq!(without_tests(text), vec!["a", "b"]);
        // A test module in a file of its own is not a block.
        let text = "a\n#[cfg(test)]\nmod tests;\nb";
        assert_eq!(without_tests(text), vec!["a"]);
    }

    #[test]
    fn groups_expand_one_level_and_paths_are_read_whole() {
        assert_eq!(expand_groups("use super::{a, b::c};"), "use super::a super::b::c;");
        assert_eq!(expand_groups("use crate::{a::{b, c}};"), "use crate::{a::{b, c}};");
        assert_eq!(
            paths("x = crate::a::b2(); mycrate::c; $crate::d"),
            vec![("crate", vec!["a", "b2"]), ("crate", vec!["d"])]
        );
    }

    #[test]
    fn modules_of_binaries_are_left_out() {
        assert_eq!(module_of("src/bin/x.rs"), None);
        assert_eq!(module_of("functions/aws-lambda/src/main.rs"), None);
        assert_eq!(
            module_of("crates/core/src/policy/mod.rs"),
            Some(vec!["crates/core".to_owned(), "policy".to_owned()])
        );
        assert_eq!(module_of("src/lib.rs"), Some(vec![String::new()]));
    }

    #[test]
    fn dependencies_go_down_the_layers_only() {
        let krate = |name: &str, deps: &[(&str, bool)]| Crate {
            name: name.to_owned(),
            depends_on: deps.iter().map(|(d, dev)| ((*d).to_owned(), *dev)).collect(),
        };
        let house = [
            krate("tagwarden-core", &[("tagwarden-testkit", true)]),
            krate("tagwarden-engine", &[("tagwarden-core", false)]),
            krate("tagwarden-aws", &[("tagwarden-engine", false)]),
            krate("tagwarden-aws-lambda", &[("tagwarden", true)]),
        ];
        assert!(layer_findings(&house).is_empty());
        let wrong = [
            krate("tagwarden-aws", &[("tagwarden-azure", false)]),
            krate("tagwarden-core", &[("tagwarden-engine", false)]),
            krate("tagwarden-engine", &[("tagwarden-testkit", false)]),
            krate("tagwarden-new", &[]),
        ];
        assert_eq!(
            layer_findings(&wrong),
            vec![
                "tagwarden-aws (layer 2) depends on tagwarden-azure (layer 2)",
                "tagwarden-core (layer 0) depends on tagwarden-engine (layer 1)",
                "tagwarden-engine (layer 1) depends on tagwarden-testkit (tooling, a dev-dependency only)",
                "tagwarden-new is in no layer: place it in PLACES (xtask/src/house.rs)",
            ]
        );
    }

    #[test]
    fn cargo_metadata_is_read_into_crates() {
        let metadata = serde_json::json!({"packages": [
            {"name": "tagwarden-core", "dependencies": [
                {"name": "serde", "kind": null},
                {"name": "tagwarden-testkit", "kind": "dev"}]},
            {"name": "tagwarden-testkit", "dependencies": []},
            {"name": "tagwarden-engine", "dependencies": [
                {"name": "tagwarden-core", "kind": null},
                {"name": "tagwarden-core", "kind": "dev"}]},
        ]});
        let crates = crates_of(&metadata).expect("well-formed");
        assert_eq!(crates[0].depends_on, vec![("tagwarden-testkit".to_owned(), true)]);
        assert_eq!(crates[2].depends_on, vec![("tagwarden-core".to_owned(), false)]);
    }
}
