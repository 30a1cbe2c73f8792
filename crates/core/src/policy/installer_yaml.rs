//! install-config `userTags` as the OpenShift installer reads them.
//!
//! The installer decodes install-config.yaml with `sigs.k8s.io/yaml` (v1.6.0 in its go.mod):
//! `AssetBase.LoadFromFile` (openshift/installer `pkg/asset/installconfig/installconfigbase.go`)
//! calls `yaml.UnmarshalStrict(data, &types.InstallConfig{}, yaml.DisallowUnknownFields)`. That is:
//!
//! 1. go-yaml v2 (`go.yaml.in/yaml/v2` v2.4.3, YAML 1.1) decodes the document into `interface{}`
//!    values, strictly (a key set twice in one mapping is an error): `decode.go`
//!    `decoder.scalar`, `resolve.go` `resolve`;
//! 2. `sigs.k8s.io/yaml` `yaml.go` `convertToJSONableObject` turns keys into strings, and turns a
//!    number or boolean into a string where the Go target is a string — as it is for
//!    `UserTags map[string]string` of `platform.aws` / `platform.azure`;
//! 3. `encoding/json` fills the map (a JSON `null` leaves the empty string).
//!
//! So a plain `yes` becomes `"true"`, `1e3` becomes `"1000"` and `0x1F` becomes `"31"`, while
//! `"yes"` stays `yes`. serde's YAML (1.2, no scalar style) cannot tell `yes` from `"yes"`, so an
//! install-config (its userTags and propagation flags) is read here instead, from a YAML event
//! parser that keeps each scalar's style and tag. Only install-configs: an Infrastructure object
//! comes from the API server with its values already strings, and a native tagwarden.yaml or bare
//! tag map is tagwarden's own format, read by serde as YAML 1.2 (load.rs `scalar`).
//!
//! Deliberately refused rather than guessed, with an error that names the key and the fix:
//! explicit `!!binary` and `!!timestamp` tags (the installer decodes them; nobody writes them in
//! userTags), and keys the installer cannot use or keeps only one of (null, collections, integers
//! above 2^63-1, two keys that become the same string, such as `yes` and `on`).

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::LazyLock;

use regex::Regex;
use saphyr_parser::{Event, Parser, ScalarStyle};

/// Deeper documents are refused (serde_json's and serde_yaml_ng's recursion limit).
const MAX_DEPTH: usize = 128;
/// Bounds the work of merge keys (`<<`) that alias one another.
const MAX_MERGED_ENTRIES: usize = 10_000;

const TAG_STR: &str = "tag:yaml.org,2002:str";
const TAG_BOOL: &str = "tag:yaml.org,2002:bool";
const TAG_INT: &str = "tag:yaml.org,2002:int";
const TAG_FLOAT: &str = "tag:yaml.org,2002:float";
const TAG_NULL: &str = "tag:yaml.org,2002:null";
const TAG_TIMESTAMP: &str = "tag:yaml.org,2002:timestamp";
const TAG_BINARY: &str = "tag:yaml.org,2002:binary";
const TAG_MERGE: &str = "tag:yaml.org,2002:merge";

/// An error at a dotted path of the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    pub path: String,
    pub message: String,
}

fn error(path: &str, message: impl Into<String>) -> Error {
    Error { path: path.to_string(), message: message.into() }
}

/// How [`read`] sees a document.
#[derive(Debug, PartialEq)]
pub(crate) enum Read {
    /// Not an install-config (no `platform` mapping, or `kind: Infrastructure` / `List`).
    Other,
    /// Not YAML this reader can parse; the message says where.
    Unreadable(String),
    /// An install-config, or why the installer would refuse it.
    InstallConfig(Result<InstallConfig, Error>),
}

/// What tagwarden takes from an install-config, decoded as the installer decodes it.
#[derive(Debug, PartialEq)]
pub(crate) struct InstallConfig {
    /// The keys under `platform`, as written (for the error on an unsupported platform).
    pub platforms: Vec<String>,
    /// `platform.aws` when present, else `platform.azure` when present.
    pub platform: Option<PlatformConfig>,
}

#[derive(Debug, PartialEq)]
pub(crate) struct PlatformConfig {
    /// `aws` or `azure`.
    pub name: &'static str,
    /// `userTags` as the installer's `map[string]string`, in document order; empty when absent.
    pub user_tags: Vec<(String, String)>,
    /// `propagateUserTags` (AWS only); `None` when absent or null.
    pub propagate_user_tags: Option<bool>,
    /// `experimentalPropagateUserTags` (AWS only); `None` when absent or null.
    pub experimental_propagate_user_tags: Option<bool>,
}

/// Read `text` as the installer would if it is an install-config (a root mapping with a `platform`
/// mapping and no `kind: Infrastructure` / `kind: List`, the order in which the loader detects kinds).
pub(crate) fn read(text: &str) -> Read {
    let root = match parse(text) {
        Ok(Some(root)) => root,
        Ok(None) => return Read::Other,
        Err(message) => return Read::Unreadable(message),
    };
    let Node::Map(entries, _) = root.as_ref() else { return Read::Other };
    let kind = get(entries, "", "kind").ok().flatten().and_then(Node::as_string);
    if matches!(kind.as_deref(), Some("Infrastructure" | "List")) {
        return Read::Other;
    }
    match get(entries, "", "platform") {
        Ok(Some(platform @ Node::Map(..))) => Read::InstallConfig(install_config(platform)),
        Ok(_) => Read::Other,
        Err(e) => Read::InstallConfig(Err(e)),
    }
}

fn install_config(platform: &Node) -> Result<InstallConfig, Error> {
    let Node::Map(entries, _) = platform else { return Err(error("platform", "expected a mapping")) };
    let platforms = entries.iter().filter_map(|(k, _)| k.as_scalar().map(|s| s.value.clone())).collect();
    let chosen = match get(entries, "platform", "aws")? {
        Some(node) => Some(("aws", node)),
        None => get(entries, "platform", "azure")?.map(|node| ("azure", node)),
    };
    let Some((name, node)) = chosen else { return Ok(InstallConfig { platforms, platform: None }) };
    let path = format!("platform.{name}");
    let fields = match node {
        Node::Map(fields, _) => fields.as_slice(),
        Node::Scalar(s) if decode(s).is_ok_and(|v| v == GoValue::Null) => &[],
        other => return Err(error(&path, format!("expected a mapping, found {}", other.describe()))),
    };
    let user_tags = match get(fields, &path, "userTags")? {
        Some(tags) => user_tags(tags, &format!("{path}.userTags"))?,
        None => Vec::new(),
    };
    let flag = |field: &str| -> Result<Option<bool>, Error> {
        if name != "aws" {
            return Ok(None);
        }
        let at = format!("{path}.{field}");
        match get(fields, &path, field)? {
            None => Ok(None),
            Some(Node::Scalar(s)) => match decode(s).map_err(|m| error(&at, m))? {
                GoValue::Null => Ok(None),
                GoValue::Bool(b) => Ok(Some(b)),
                other => Err(error(&at, format!("expected true or false, found {}", other.describe()))),
            },
            Some(other) => Err(error(&at, format!("expected true or false, found {}", other.describe()))),
        }
    };
    Ok(InstallConfig {
        platforms,
        platform: Some(PlatformConfig {
            name,
            user_tags,
            propagate_user_tags: flag("propagateUserTags")?,
            experimental_propagate_user_tags: flag("experimentalPropagateUserTags")?,
        }),
    })
}

/// The value of key `name` in a mapping at `path`; the installer decodes strictly, so a key set
/// twice is an error.
fn get<'n>(entries: &'n [(Rc<Node>, Rc<Node>)], path: &str, name: &str) -> Result<Option<&'n Node>, Error> {
    let mut found = entries.iter().filter(|(k, _)| k.as_string().as_deref() == Some(name)).map(|(_, v)| v.as_ref());
    let first = found.next();
    if found.next().is_some() {
        let at = if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
        return Err(error(&at, "is set twice; the installer refuses a key set twice in one mapping"));
    }
    Ok(first)
}

/// A userTags mapping as the installer's `map[string]string`, in document order.
fn user_tags(node: &Node, path: &str) -> Result<Vec<(String, String)>, Error> {
    let entries = match node {
        Node::Map(..) => merged_entries(node).map_err(|m| error(path, m))?,
        Node::Scalar(s) if decode(s).is_ok_and(|v| v == GoValue::Null) => return Ok(Vec::new()),
        other => {
            return Err(error(path, format!("expected a map of tag keys to values, found {}", other.describe())));
        }
    };
    let mut tags: Vec<(String, String)> = Vec::with_capacity(entries.len());
    let mut lines: Vec<usize> = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        let line = key.line();
        let key = key_string(key).map_err(|m| error(path, format!("key at line {line}: {m}")))?;
        let at = format!("{path}.{key}");
        if let Some(i) = tags.iter().position(|(k, _)| *k == key) {
            return Err(error(
                &at,
                format!(
                    "the keys at lines {} and {line} both become {key:?} as the installer reads YAML \
                     (YAML 1.1: yes/on/true are one boolean, 0x1F and 31 one number), and it refuses or \
                     keeps either one; keep one, or quote the keys to keep them apart",
                    lines[i]
                ),
            ));
        }
        let value = value_string(value).map_err(|m| error(&at, format!("line {}: {m}", value.line())))?;
        tags.push((key, value));
        lines.push(line);
    }
    Ok(tags)
}

/// A YAML node: only what the userTags need, with aliases shared rather than copied.
#[derive(Debug)]
enum Node {
    Scalar(Scalar),
    Seq(Vec<Rc<Node>>, usize),
    Map(Vec<(Rc<Node>, Rc<Node>)>, usize),
}

#[derive(Debug)]
struct Scalar {
    value: String,
    style: ScalarStyle,
    /// The resolved tag (`tag:yaml.org,2002:str`, `!local`, `!` for the non-specific tag).
    tag: Option<String>,
    line: usize,
}

impl Node {
    fn line(&self) -> usize {
        match self {
            Node::Scalar(s) => s.line,
            Node::Seq(_, line) | Node::Map(_, line) => *line,
        }
    }

    fn describe(&self) -> &'static str {
        match self {
            Node::Scalar(_) => "a scalar",
            Node::Seq(..) => "a list",
            Node::Map(..) => "a mapping",
        }
    }

    fn as_scalar(&self) -> Option<&Scalar> {
        match self {
            Node::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// A scalar that decodes to a string, as that string.
    fn as_string(&self) -> Option<String> {
        match decode(self.as_scalar()?) {
            Ok(GoValue::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// go-yaml v2 `isMerge` (decode.go): a `<<` key, plain or tagged `!!merge`.
    fn is_merge(&self) -> bool {
        matches!(self, Node::Scalar(s) if s.value == "<<"
            && ((s.tag.is_none() && s.style == ScalarStyle::Plain) || matches!(s.tag.as_deref(), Some("!" | TAG_MERGE))))
    }
}

enum Open {
    Seq { anchor: usize, line: usize, items: Vec<Rc<Node>> },
    Map { anchor: usize, line: usize, entries: Vec<(Rc<Node>, Rc<Node>)>, key: Option<Rc<Node>> },
}

/// The first document's root (go-yaml's `Unmarshal` reads only the first), or `None` if empty.
fn parse(text: &str) -> Result<Option<Rc<Node>>, String> {
    let mut anchors: HashMap<usize, Rc<Node>> = HashMap::new();
    let mut stack: Vec<Open> = Vec::new();
    for next in Parser::new_from_str(text) {
        let (event, span) = next.map_err(|e| format!("not valid YAML: {e}"))?;
        let line = span.start.line();
        let (node, anchor) = match event {
            Event::Nothing | Event::StreamStart | Event::DocumentStart(_) => continue,
            Event::DocumentEnd | Event::StreamEnd => break,
            Event::Scalar(value, style, anchor, tag) => {
                let tag = tag.map(|t| format!("{}{}", t.handle, t.suffix));
                (Rc::new(Node::Scalar(Scalar { value: value.into_owned(), style, tag, line })), anchor)
            }
            Event::Alias(id) => {
                let node =
                    anchors.get(&id).cloned().ok_or_else(|| format!("line {line}: alias to an unknown anchor"))?;
                (node, 0)
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if stack.len() >= MAX_DEPTH => {
                return Err(format!("line {line}: nested deeper than {MAX_DEPTH} levels"));
            }
            Event::SequenceStart(anchor, _) => {
                stack.push(Open::Seq { anchor, line, items: Vec::new() });
                continue;
            }
            Event::MappingStart(anchor, _) => {
                stack.push(Open::Map { anchor, line, entries: Vec::new(), key: None });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Open::Seq { anchor, line, items }) => (Rc::new(Node::Seq(items, line)), anchor),
                Some(Open::Map { anchor, line, entries, .. }) => (Rc::new(Node::Map(entries, line)), anchor),
                None => return Err(format!("line {line}: unbalanced collection")),
            },
        };
        if anchor != 0 {
            anchors.insert(anchor, Rc::clone(&node));
        }
        match stack.last_mut() {
            None => return Ok(Some(node)),
            Some(Open::Seq { items, .. }) => items.push(node),
            Some(Open::Map { entries, key, .. }) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
        }
    }
    Ok(None)
}

/// A mapping's entries with merge keys expanded (go-yaml v2 `decoder.mapping` / `decoder.merge`).
/// Decoding is strict, so any key set twice is an error whatever the merge order: entries are only
/// collected here and the caller refuses duplicates.
fn merged_entries(map: &Node) -> Result<Vec<(&Node, &Node)>, String> {
    fn walk<'n>(map: &'n Node, out: &mut Vec<(&'n Node, &'n Node)>, budget: &mut usize) -> Result<(), String> {
        let Node::Map(entries, _) = map else {
            return Err(format!(
                "line {}: a merge key (<<) needs a mapping or a list of mappings, found {}",
                map.line(),
                map.describe()
            ));
        };
        for (k, v) in entries {
            *budget = budget
                .checked_sub(1)
                .ok_or(format!("too many entries: more than {MAX_MERGED_ENTRIES}, counting those merged with <<"))?;
            if !k.is_merge() {
                out.push((k, v));
                continue;
            }
            match v.as_ref() {
                m @ Node::Map(..) => walk(m, out, budget)?,
                Node::Seq(items, _) => {
                    for item in items.iter().rev() {
                        walk(item, out, budget)?;
                    }
                }
                other => {
                    return Err(format!(
                        "line {}: a merge key (<<) needs a mapping or a list of mappings, found {}",
                        other.line(),
                        other.describe()
                    ))
                }
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    let mut budget = MAX_MERGED_ENTRIES;
    walk(map, &mut out, &mut budget)?;
    Ok(out)
}

/// A scalar as go-yaml v2 decodes it into `interface{}`.
#[derive(Debug, Clone, PartialEq)]
enum GoValue {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
}

impl GoValue {
    fn describe(&self) -> &'static str {
        match self {
            GoValue::Null => "null",
            GoValue::Bool(_) => "a boolean",
            GoValue::Int(_) | GoValue::Uint(_) | GoValue::Float(_) => "a number",
            GoValue::Str(_) => "a string",
        }
    }
}

/// go-yaml v2 `decoder.scalar` into an `interface{}`: an untagged quoted or block scalar is a
/// string as written; a plain one, or one with a tag (`!` included), goes through `resolve`.
/// A timestamp stays the string as written ("for backward compatibility", decode.go).
fn decode(s: &Scalar) -> Result<GoValue, String> {
    match s.tag.as_deref() {
        None if s.style == ScalarStyle::Plain => resolve("", &s.value),
        None => Ok(GoValue::Str(s.value.clone())),
        Some(tag) => resolve(tag, &s.value),
    }
}

/// go-yaml v2 `resolve.go` `resolve(tag, in)`, for the tags a userTags scalar can carry.
fn resolve(tag: &str, input: &str) -> Result<GoValue, String> {
    match tag {
        // `resolvableTag`: any other tag (`!`, `!local`, `!!seq`…) leaves the text as written.
        "" | TAG_BOOL | TAG_INT | TAG_FLOAT | TAG_NULL => {}
        TAG_STR => return Ok(GoValue::Str(input.to_string())),
        TAG_BINARY | TAG_TIMESTAMP => {
            return Err(format!(
                "explicit {} tags are not supported in userTags; write the value as a quoted string",
                short_tag(tag)
            ))
        }
        _ => return Ok(GoValue::Str(input.to_string())),
    }
    let (rtag, out) = resolve_implicit(input);
    // The deferred check of `resolve`: an explicit tag must match what the text resolves to,
    // except that an integer satisfies !!float (int and int64 only: v2 has no uint64 case).
    match (tag, out) {
        ("", out) => Ok(out),
        (t, out) if t == rtag => Ok(out),
        (TAG_FLOAT, GoValue::Int(i)) => Ok(GoValue::Float(i as f64)),
        (t, _) => Err(format!("the installer cannot decode {} `{input}` as a {}", short_tag(rtag), short_tag(t))),
    }
}

fn short_tag(tag: &str) -> String {
    match tag.strip_prefix("tag:yaml.org,2002:") {
        Some(s) => format!("!!{s}"),
        None => tag.to_string(),
    }
}

// resolve.go `yamlStyleFloat`.
static YAML_STYLE_FLOAT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$").expect("static regex"));

/// The body of go-yaml v2 `resolve` for a plain scalar: (resolved tag, value).
fn resolve_implicit(input: &str) -> (&'static str, GoValue) {
    // `resolveTable`: the first byte hints at what the scalar may be; `resolveMap` holds the words.
    let hint = match input.as_bytes().first() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => b'M',
        Some(b'.') => b'.',
        Some(_) => 0,
    };
    if hint == 0 {
        return (TAG_STR, GoValue::Str(input.to_string()));
    }
    let word = match input {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => Some(GoValue::Bool(true)),
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Some(GoValue::Bool(false))
        }
        "" | "~" | "null" | "Null" | "NULL" => Some(GoValue::Null),
        ".nan" | ".NaN" | ".NAN" => Some(GoValue::Float(f64::NAN)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Some(GoValue::Float(f64::INFINITY)),
        "-.inf" | "-.Inf" | "-.INF" => Some(GoValue::Float(f64::NEG_INFINITY)),
        _ => None,
    };
    match word {
        Some(v @ GoValue::Bool(_)) => return (TAG_BOOL, v),
        Some(GoValue::Null) => return (TAG_NULL, GoValue::Null),
        Some(v) => return (TAG_FLOAT, v),
        None => {}
    }
    match hint {
        b'.' => {
            if let Some(f) = go_parse_float(input) {
                return (TAG_FLOAT, GoValue::Float(f));
            }
        }
        b'D' | b'S' => {
            // A timestamp (`2001-12-14`) is tried first, but decodes to the text as written, and
            // nothing shaped like one parses as a number below: skipping the check changes nothing.
            let plain = input.replace('_', "");
            if let Ok(i) = go_parse_int(&plain, 0) {
                return (TAG_INT, GoValue::Int(i));
            }
            if let Ok(u) = go_parse_uint(&plain, 0) {
                return (TAG_INT, GoValue::Uint(u));
            }
            if YAML_STYLE_FLOAT.is_match(&plain) {
                if let Some(f) = go_parse_float(&plain) {
                    return (TAG_FLOAT, GoValue::Float(f));
                }
            }
            // ParseInt in base 2 takes a sign after the prefix: `0b-101` is -5.
            if let Some(rest) = plain.strip_prefix("0b") {
                if let Ok(i) = go_parse_int(rest, 2) {
                    return (TAG_INT, GoValue::Int(i));
                }
                if let Ok(u) = go_parse_uint(rest, 2) {
                    return (TAG_INT, GoValue::Uint(u));
                }
            } else if let Some(rest) = plain.strip_prefix("-0b") {
                if let Ok(i) = go_parse_int(&format!("-{rest}"), 2) {
                    return (TAG_INT, GoValue::Int(i));
                }
            }
        }
        _ => {}
    }
    (TAG_STR, GoValue::Str(input.to_string()))
}

/// A key as `convertToJSONableObject` turns it into a JSON object key (yaml.go, the map case).
fn key_string(node: &Node) -> Result<String, String> {
    let Node::Scalar(s) = node else {
        return Err(format!("a tag key must be a scalar, found {}", node.describe()));
    };
    Ok(match decode(s)? {
        GoValue::Str(s) => s,
        GoValue::Int(i) => i.to_string(),
        GoValue::Bool(b) => b.to_string(),
        // FormatFloat(f, 'g', -1, 32), then +Inf/-Inf/NaN spelled as YAML (for keys only).
        GoValue::Float(f) => match format_float32(f).as_str() {
            "+Inf" => ".inf".to_string(),
            "-Inf" => "-.inf".to_string(),
            "NaN" => ".nan".to_string(),
            other => other.to_string(),
        },
        GoValue::Null => {
            return Err("a null key (`~`, `null` or nothing) cannot be a tag key, and the installer refuses it; \
                        quote the key if it is meant as text"
                .to_string())
        }
        GoValue::Uint(u) => {
            return Err(format!("the installer refuses the key {u}, an integer above 2^63-1; quote it"));
        }
    })
}

/// A value as the installer's `map[string]string` holds it: `convertToJSONableObject` (yaml.go,
/// the default case with a string target) formats numbers and booleans, and `encoding/json`
/// decodes a `null` into a map of strings as the empty string.
fn value_string(node: &Node) -> Result<String, String> {
    let Node::Scalar(s) = node else {
        return Err(format!("expected a string value, found {}; write the value as one string", node.describe()));
    };
    Ok(match decode(s)? {
        GoValue::Str(s) => s,
        GoValue::Null => String::new(),
        GoValue::Bool(b) => b.to_string(),
        GoValue::Int(i) => i.to_string(),
        GoValue::Uint(u) => u.to_string(),
        GoValue::Float(f) => format_float32(f),
    })
}

/// Go `strconv.FormatFloat(f, 'g', -1, 32)` (ftoa.go `genericFtoa`, `formatDigits`): rounded to
/// float32, the shortest digits that read back as that float32, `%e` when the decimal exponent is
/// below -4 or at least 6 (the shortest-mode precision), else `%f`. Go converts with `float32(val)`,
/// which rounds to nearest even and gives ±Inf past float32's range, as Rust's `as f32` does.
fn format_float32(f: f64) -> String {
    let f = f as f32;
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0");
    }
    let (digits, exp) = shortest_digits(f.abs());
    let nd = digits.len() as i32;
    let dp = exp + 1; // the decimal point's position in `digits`
    let digit = |i: i32| usize::try_from(i).ok().and_then(|i| digits.get(i)).map_or('0', |d| char::from(*d));
    let mut out = String::from(sign);
    if !(-4..6).contains(&exp) {
        // fmtE with prec = nd-1: all digits, and an exponent of at least two digits.
        out.push(digit(0));
        if nd > 1 {
            out.push('.');
            (1..nd).for_each(|i| out.push(digit(i)));
        }
        out.push_str(&format!("e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs()));
    } else {
        // fmtF with prec = max(nd-dp, 0).
        if dp > 0 {
            (0..dp).for_each(|i| out.push(digit(i)));
        } else {
            out.push('0');
        }
        let prec = (nd - dp).max(0);
        if prec > 0 {
            out.push('.');
            (0..prec).for_each(|i| out.push(digit(dp + i)));
        }
    }
    out
}

/// The shortest decimal digits that read back as the positive, finite `f`, and the decimal
/// exponent of the first: Go's `ryuFtoaShortest` (ftoaryu.go). Rust's `{:e}` finds the same
/// length and, but for one case, the same digits: when `f` lies exactly halfway between two
/// candidates, Rust rounds up and Go rounds to the even digit (`ryuDigits32`: "round up if ... the
/// new value of m is odd"). A tie shows in `f`'s exact expansion (a float32 has at most 112
/// significant digits, so 120 digits print it exactly): one digit more than the shortest, a 5.
/// Rounding down cannot leave the rounding interval: it is symmetric except at a power of two,
/// and no power of two ties (checked against Go for all of them).
fn shortest_digits(f: f32) -> (Vec<u8>, i32) {
    fn split(sci: &str) -> (Vec<u8>, i32) {
        let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
        let mut digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
        while digits.len() > 1 && digits.last() == Some(&b'0') {
            digits.pop();
        }
        (digits, exp.parse().unwrap_or(0))
    }
    let (mut digits, exp) = split(&format!("{f:e}"));
    let (exact, exact_exp) = split(&format!("{:.120e}", f64::from(f)));
    let n = digits.len();
    let tie = exact_exp == exp && exact.len() == n + 1 && exact.last() == Some(&b'5');
    if tie && digits.last().is_some_and(|d| (d - b'0') % 2 == 1) {
        let mut down = digits.clone();
        if let Some(last) = down.last_mut() {
            *last -= 1;
        }
        // Only when Rust's digits are that tie rounded up.
        if exact[..n] == down[..] {
            while down.len() > 1 && down.last() == Some(&b'0') {
                down.pop();
            }
            digits = down;
        }
    }
    (digits, exp)
}

#[derive(Debug, PartialEq, Eq)]
enum NumError {
    Syntax,
    Range,
}

/// Go `strconv.ParseUint(s, base, 64)` (atoi.go) for base 0 or 2..=36. Base 0 takes the base from
/// the prefix (`0b`, `0o`, `0x`, `0` for octal, else decimal) and allows underscores as
/// `underscoreOK` does; no sign.
fn go_parse_uint(s: &str, base: u32) -> Result<u64, NumError> {
    let b = s.as_bytes();
    if b.is_empty() {
        return Err(NumError::Syntax);
    }
    let base0 = base == 0;
    let (base, digits): (u64, &[u8]) = match b {
        _ if !base0 => (u64::from(base), b),
        [b'0', p, _, ..] if p | 0x20 == b'b' => (2, &b[2..]),
        [b'0', p, _, ..] if p | 0x20 == b'o' => (8, &b[2..]),
        [b'0', p, _, ..] if p | 0x20 == b'x' => (16, &b[2..]),
        [b'0', ..] => (8, &b[1..]),
        _ => (10, b),
    };
    let mut underscores = false;
    let mut n: u64 = 0;
    for &c in digits {
        let d = match c {
            b'_' if base0 => {
                underscores = true;
                continue;
            }
            b'0'..=b'9' => c - b'0',
            _ if (c | 0x20).is_ascii_lowercase() => (c | 0x20) - b'a' + 10,
            _ => return Err(NumError::Syntax),
        };
        if u64::from(d) >= base {
            return Err(NumError::Syntax);
        }
        n = n.checked_mul(base).and_then(|n| n.checked_add(u64::from(d))).ok_or(NumError::Range)?;
    }
    if underscores && !underscore_ok(s) {
        return Err(NumError::Syntax);
    }
    Ok(n)
}

/// Go `strconv.ParseInt(s, base, 64)`: an optional sign, then [`go_parse_uint`] within int64's range.
fn go_parse_int(s: &str, base: u32) -> Result<i64, NumError> {
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let un = go_parse_uint(rest, base)?;
    if neg {
        0i64.checked_sub_unsigned(un).ok_or(NumError::Range)
    } else {
        i64::try_from(un).map_err(|_| NumError::Range)
    }
}

/// Go `strconv.ParseFloat(s, 64)` for decimal text (atof.go `readFloat`, `atof64`): an optional
/// sign, digits with at most one `.` and at least one digit, an optional exponent, nothing after;
/// underscores as `underscoreOK` allows; out of range (±Inf) is an error, underflow is 0.
/// Hexadecimal and `inf`/`nan` text cannot reach its callers (`resolve` only calls it on text that
/// starts with `.` or matches `yamlStyleFloat`), so they are not accepted.
fn go_parse_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let (mut saw_digits, mut saw_dot, mut underscores) = (false, false, false);
    while let Some(&c) = b.get(i) {
        match c {
            b'_' => underscores = true,
            b'.' if !saw_dot => saw_dot = true,
            b'0'..=b'9' => saw_digits = true,
            _ => break,
        }
        i += 1;
    }
    if !saw_digits {
        return None;
    }
    if b.get(i).is_some_and(|c| c | 0x20 == b'e') {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !b.get(i).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        while let Some(&c) = b.get(i).filter(|c| c.is_ascii_digit() || **c == b'_') {
            underscores |= c == b'_';
            i += 1;
        }
    }
    if i != b.len() || (underscores && !underscore_ok(s)) {
        return None;
    }
    let f: f64 = s.replace('_', "").parse().ok()?;
    f.is_finite().then_some(f)
}

/// Go `strconv.underscoreOK`: underscores only between digits, or between a base prefix and a digit.
fn underscore_ok(s: &str) -> bool {
    let mut b = s.as_bytes();
    if let [b'+' | b'-', rest @ ..] = b {
        b = rest;
    }
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if let [b'0', p, ..] = b {
        if matches!(p | 0x20, b'b' | b'o' | b'x') {
            i = 2;
            saw = b'0';
            hex = p | 0x20 == b'x';
        }
    }
    for &c in &b[i..] {
        if c.is_ascii_digit() || (hex && (b'a'..=b'f').contains(&(c | 0x20))) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else if saw == b'_' {
            return false;
        } else {
            saw = b'!';
        }
    }
    saw != b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Ok(None)`: the document has no platform.aws.
    fn tags(yaml: &str) -> Result<Option<Vec<(String, String)>>, Error> {
        match read(yaml) {
            Read::InstallConfig(ic) => Ok(ic?.platform.map(|p| p.user_tags)),
            other => panic!("{yaml}: not read as an install-config: {other:?}"),
        }
    }

    #[test]
    fn format_float32_matches_go() {
        // strconv.FormatFloat(f, 'g', -1, 32), worked through ftoa.go's formatDigits.
        for (f, want) in [
            (1000.0, "1000"),
            (1.23456789, "1.2345679"),
            (0.5, "0.5"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (16777217.0, "1.6777216e+07"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e-40, "1e-40"),
            (1e30, "1e+30"),
            (1e39, "+Inf"),
            (-1e39, "-Inf"),
            (f64::NAN, "NaN"),
            (0.0, "0"),
            (-0.0, "-0"),
            (-2.5, "-2.5"),
            (1.8446744073709552e19, "1.8446744e+19"),
            // Exactly halfway between two shortest candidates: Go rounds to the even digit.
            (2352156.25, "2.3521562e+06"),
            (495651.625, "495651.62"),
            (24826.3125, "24826.312"),
        ] {
            assert_eq!(format_float32(f), want, "{f}");
        }
    }

    #[test]
    fn go_number_parsing() {
        assert_eq!(go_parse_int("0x1F", 0), Ok(31));
        assert_eq!(go_parse_int("-0x1F", 0), Ok(-31));
        assert_eq!(go_parse_int("017", 0), Ok(15));
        assert_eq!(go_parse_int("0o17", 0), Ok(15));
        assert_eq!(go_parse_int("0b101", 0), Ok(5));
        assert_eq!(go_parse_int("0b-101", 0), Err(NumError::Syntax));
        assert_eq!(go_parse_int("-101", 2), Ok(-5));
        assert_eq!(go_parse_uint("1_0", 2), Err(NumError::Syntax), "underscores only in base 0");
        assert_eq!(go_parse_int("0", 0), Ok(0));
        assert_eq!(go_parse_int("08", 0), Err(NumError::Syntax));
        assert_eq!(go_parse_int("0x", 0), Err(NumError::Syntax));
        assert_eq!(go_parse_int("+", 0), Err(NumError::Syntax));
        assert_eq!(go_parse_int("-9223372036854775808", 0), Ok(i64::MIN));
        assert_eq!(go_parse_int("9223372036854775808", 0), Err(NumError::Range));
        assert_eq!(go_parse_uint("9223372036854775808", 0), Ok(1 << 63));
        assert_eq!(go_parse_uint("+1", 0), Err(NumError::Syntax));
        assert_eq!(go_parse_uint("18446744073709551616", 0), Err(NumError::Range));
        assert_eq!(go_parse_float(".5"), Some(0.5));
        assert_eq!(go_parse_float(".5_5"), Some(0.55));
        assert_eq!(go_parse_float("._5"), None);
        assert_eq!(go_parse_float("5."), Some(5.0));
        assert_eq!(go_parse_float("1E3"), Some(1000.0));
        assert_eq!(go_parse_float("1e400"), None, "out of range is an error in Go");
        assert_eq!(go_parse_float("1e-400"), Some(0.0), "underflow is not");
        assert_eq!(go_parse_float("."), None);
        assert_eq!(go_parse_float(".5."), None);
        assert!(underscore_ok("1_000") && !underscore_ok("1__0") && !underscore_ok("1_") && underscore_ok("0x_1F"));
    }

    #[test]
    fn detection_and_flags() {
        assert_eq!(read("kind: Infrastructure\nplatform: {aws: {}}\n"), Read::Other);
        assert_eq!(read("kind: List\nitems: []\n"), Read::Other);
        assert_eq!(read("team: platform\n"), Read::Other);
        assert_eq!(read("platform: aws\n"), Read::Other, "not a mapping: serde's loader says why");
        assert_eq!(read(""), Read::Other);
        assert!(matches!(read("a: [1\n"), Read::Unreadable(_)));
        let ic = |yaml: &str| match read(yaml) {
            Read::InstallConfig(ic) => ic,
            other => panic!("{yaml}: {other:?}"),
        };
        let p = ic("platform: {aws: {propagateUserTags: yes, experimentalPropagateUserTags: ~}}")
            .expect("reads")
            .platform
            .expect("aws");
        assert_eq!((p.name, p.propagate_user_tags, p.experimental_propagate_user_tags), ("aws", Some(true), None));
        let p = ic("platform: {aws: {experimentalPropagateUserTags: off}}").expect("reads").platform.expect("aws");
        assert_eq!(p.experimental_propagate_user_tags, Some(false));
        // A string is not a bool to encoding/json: the installer refuses it.
        let e = ic("platform: {aws: {propagateUserTags: \"true\"}}").expect_err("a string");
        assert_eq!(e.path, "platform.aws.propagateUserTags");
        assert!(e.message.contains("found a string"), "{e:?}");
        let e = ic("platform: {aws: {}, aws: {}}").expect_err("twice");
        assert_eq!(e.path, "platform.aws");
        let gcp = ic("platform: {gcp: {}, none: {}}").expect("reads");
        assert_eq!((gcp.platforms.as_slice(), gcp.platform), (&["gcp".to_string(), "none".to_string()][..], None));
        assert_eq!(ic("platform: {azure: ~}").expect("reads").platform.map(|p| p.name), Some("azure"));
    }

    #[test]
    fn aliases_merges_and_refusals() {
        let doc = "base: &b {team: a, cost: 10}\nplatform:\n  aws:\n    userTags:\n      <<: *b\n      env: *x\n";
        assert!(matches!(read(doc), Read::Unreadable(ref m) if m.contains("unknown anchor")), "{:?}", read(doc));
        let doc = "x: &x prod\nbase: &b {team: a, cost: 0x10}\nplatform:\n  aws:\n    userTags:\n      <<: *b\n      env: *x\n";
        let want = [("team", "a"), ("cost", "16"), ("env", "prod")].map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(tags(doc), Ok(Some(want.to_vec())));
        // Strict decoding: a merged key set again is an error, not an override.
        let doc = "b: &b {team: a}\nplatform: {aws: {userTags: {<<: *b, team: b}}}\n";
        assert!(tags(doc).is_err_and(|e| e.message.contains("both become")));
        // A quoted "<<" is an ordinary key.
        assert_eq!(tags("platform: {aws: {userTags: {'<<': x}}}"), Ok(Some(vec![("<<".into(), "x".into())])));
        assert_eq!(tags("platform: {aws: {}}"), Ok(Some(vec![])));
        assert_eq!(tags("platform: {gcp: {}}"), Ok(None));
        assert_eq!(tags("platform: {aws: {userTags: ~}}"), Ok(Some(vec![])));
        assert!(tags("platform: {aws: {userTags: [a]}}").is_err_and(|e| e.message.contains("a list")));
        assert!(tags("platform: {aws: {userTags: {a: [b]}}}").is_err_and(|e| e.path == "platform.aws.userTags.a"));
        assert!(tags("platform: {aws: {userTags: {~: b}}}").is_err_and(|e| e.message.contains("null key")));
        assert!(tags("platform: {aws: {userTags: {a: !!binary aGk=}}}").is_err_and(|e| e.message.contains("!!binary")));
        assert!(tags("platform: {aws: {userTags: {a: !!int abc}}}").is_err_and(|e| e.message.contains("!!int")));
        let deep = format!("platform: {{aws: {{userTags: {{a: {}{}}}}}}}", "[".repeat(200), "]".repeat(200));
        assert!(matches!(read(&deep), Read::Unreadable(ref m) if m.contains("deeper")));
        // An exponential chain of merges of empty maps is bounded.
        let mut doc = String::from("m0: &m0 {}\n");
        for i in 1..40 {
            doc.push_str(&format!("m{i}: &m{i} {{<<: [*m{0}, *m{0}]}}\n", i - 1));
        }
        doc.push_str("platform: {aws: {userTags: {<<: *m39}}}\n");
        assert!(tags(&doc).is_err_and(|e| e.message.contains("too many")));
    }
}
