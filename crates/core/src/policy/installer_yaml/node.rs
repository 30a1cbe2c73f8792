//! The YAML event stream read into nodes (aliases shared, merge keys expanded), keeping each
//! scalar's style and tag for the installer's YAML 1.1 decoding.

use std::collections::HashMap;
use std::rc::Rc;

use saphyr_parser::{Event, Parser, ScalarStyle};

use super::{DecodeError, MAX_DEPTH, MAX_MERGED_ENTRIES, TAG_MERGE};

/// A YAML node: only what the userTags need, with aliases shared rather than copied.
#[derive(Debug)]
pub(super) enum Node {
    Scalar(Scalar),
    Seq(Vec<Rc<Node>>, usize),
    Map(Vec<(Rc<Node>, Rc<Node>)>, usize),
}

#[derive(Debug)]
pub(super) struct Scalar {
    pub(super) value: String,
    pub(super) style: ScalarStyle,
    /// The resolved tag (`tag:yaml.org,2002:str`, `!local`, `!` for the non-specific tag).
    pub(super) tag: Option<String>,
    line: usize,
}

impl Node {
    pub(super) fn line(&self) -> usize {
        match self {
            Node::Scalar(s) => s.line,
            Node::Seq(_, line) | Node::Map(_, line) => *line,
        }
    }

    pub(super) fn describe(&self) -> &'static str {
        match self {
            Node::Scalar(_) => "a scalar",
            Node::Seq(..) => "a list",
            Node::Map(..) => "a mapping",
        }
    }

    pub(super) fn as_scalar(&self) -> Option<&Scalar> {
        match self {
            Node::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// go-yaml v2 `isMerge` (decode.go): a `<<` key, plain or tagged `!!merge`.
    pub(super) fn is_merge(&self) -> bool {
        matches!(self, Node::Scalar(s) if s.value == "<<"
            && ((s.tag.is_none() && s.style == ScalarStyle::Plain) || matches!(s.tag.as_deref(), Some("!" | TAG_MERGE))))
    }
}

enum Open {
    Seq { anchor: usize, line: usize, items: Vec<Rc<Node>> },
    Map { anchor: usize, line: usize, entries: Vec<(Rc<Node>, Rc<Node>)>, key: Option<Rc<Node>> },
}

/// The first document's root (go-yaml's `Unmarshal` reads only the first), or `None` if empty.
pub(super) fn parse(text: &str) -> Result<Option<Rc<Node>>, DecodeError> {
    let mut anchors: HashMap<usize, Rc<Node>> = HashMap::new();
    let mut stack: Vec<Open> = Vec::new();
    for next in Parser::new_from_str(text) {
        let (event, span) = next.map_err(DecodeError::NotYaml)?;
        let line = span.start.line();
        let (node, anchor) = match event {
            Event::Nothing | Event::StreamStart | Event::DocumentStart(_) => continue,
            Event::DocumentEnd | Event::StreamEnd => break,
            Event::Scalar(value, style, anchor, tag) => {
                let tag = tag.map(|t| format!("{}{}", t.handle, t.suffix));
                (Rc::new(Node::Scalar(Scalar { value: value.into_owned(), style, tag, line })), anchor)
            }
            Event::Alias(id) => {
                let node = anchors.get(&id).cloned().ok_or(DecodeError::UnknownAnchor { line })?;
                (node, 0)
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if stack.len() >= MAX_DEPTH => {
                return Err(DecodeError::TooDeep { line });
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
                None => return Err(DecodeError::Unbalanced { line }),
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
pub(super) fn merged_entries(map: &Node) -> Result<Vec<(&Node, &Node)>, DecodeError> {
    fn walk<'n>(map: &'n Node, out: &mut Vec<(&'n Node, &'n Node)>, budget: &mut usize) -> Result<(), DecodeError> {
        let Node::Map(entries, _) = map else {
            return Err(DecodeError::MergeOfNonMapping { line: map.line(), found: map.describe() });
        };
        for (k, v) in entries {
            *budget = budget.checked_sub(1).ok_or(DecodeError::TooManyEntries)?;
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
                other => return Err(DecodeError::MergeOfNonMapping { line: other.line(), found: other.describe() }),
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    let mut budget = MAX_MERGED_ENTRIES;
    walk(map, &mut out, &mut budget)?;
    Ok(out)
}
