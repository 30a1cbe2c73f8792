//! go-yaml v2's scalar resolution (YAML 1.1), and the strings `sigs.k8s.io/yaml` makes of the
//! resolved values for a `map[string]string`.

use std::sync::LazyLock;

use regex::Regex;
use saphyr_parser::ScalarStyle;

use super::node::{Node, Scalar};
use super::strconv::{format_float32, go_parse_float, go_parse_int, go_parse_uint};
use super::{DecodeError, TAG_BINARY, TAG_BOOL, TAG_FLOAT, TAG_INT, TAG_NULL, TAG_STR, TAG_TIMESTAMP};

/// A scalar as go-yaml v2 decodes it into `interface{}`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum GoValue {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
}

impl GoValue {
    pub(super) fn describe(&self) -> &'static str {
        match self {
            GoValue::Null => "null",
            GoValue::Bool(_) => "a boolean",
            GoValue::Int(_) | GoValue::Uint(_) | GoValue::Float(_) => "a number",
            GoValue::Str(_) => "a string",
        }
    }
}

impl Node {
    /// A scalar that decodes to a string, as that string (here, not in `node`, so that the
    /// parser does not import the resolver that imports it).
    pub(super) fn as_string(&self) -> Option<String> {
        match decode(self.as_scalar()?) {
            Ok(GoValue::Str(s)) => Some(s),
            _ => None,
        }
    }
}

/// go-yaml v2 `decoder.scalar` into an `interface{}`: an untagged quoted or block scalar is a
/// string as written; a plain one, or one with a tag (`!` included), goes through `resolve`.
/// A timestamp stays the string as written ("for backward compatibility", decode.go).
pub(super) fn decode(s: &Scalar) -> Result<GoValue, DecodeError> {
    match s.tag.as_deref() {
        None if s.style == ScalarStyle::Plain => resolve("", &s.value),
        None => Ok(GoValue::Str(s.value.clone())),
        Some(tag) => resolve(tag, &s.value),
    }
}

/// go-yaml v2 `resolve.go` `resolve(tag, in)`, for the tags a userTags scalar can carry.
fn resolve(tag: &str, input: &str) -> Result<GoValue, DecodeError> {
    match tag {
        // `resolvableTag`: any other tag (`!`, `!local`, `!!seq`…) leaves the text as written.
        "" | TAG_BOOL | TAG_INT | TAG_FLOAT | TAG_NULL => {}
        TAG_STR => return Ok(GoValue::Str(input.to_string())),
        TAG_BINARY | TAG_TIMESTAMP => return Err(DecodeError::UnsupportedTag { tag: short_tag(tag) }),
        _ => return Ok(GoValue::Str(input.to_string())),
    }
    let (rtag, out) = resolve_implicit(input);
    // The deferred check of `resolve`: an explicit tag must match what the text resolves to,
    // except that an integer satisfies !!float (int and int64 only: v2 has no uint64 case).
    match (tag, out) {
        ("", out) => Ok(out),
        (t, out) if t == rtag => Ok(out),
        (TAG_FLOAT, GoValue::Int(i)) => Ok(GoValue::Float(i as f64)),
        (t, _) => {
            Err(DecodeError::TagMismatch { resolved: short_tag(rtag), input: input.to_string(), tag: short_tag(t) })
        }
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
pub(super) fn key_string(node: &Node) -> Result<String, DecodeError> {
    let Node::Scalar(s) = node else {
        return Err(DecodeError::KeyNotScalar { found: node.describe() });
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
        GoValue::Null => return Err(DecodeError::NullKey),
        GoValue::Uint(u) => {
            return Err(DecodeError::KeyAboveInt64(u));
        }
    })
}

/// A value as the installer's `map[string]string` holds it: `convertToJSONableObject` (yaml.go,
/// the default case with a string target) formats numbers and booleans, and `encoding/json`
/// decodes a `null` into a map of strings as the empty string.
pub(super) fn value_string(node: &Node) -> Result<String, DecodeError> {
    let Node::Scalar(s) = node else {
        return Err(DecodeError::ValueNotScalar { found: node.describe() });
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
