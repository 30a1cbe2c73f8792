//! The two readings of Storage's XML bodies tagwarden needs (a listing's `<Blob>` entries, an
//! error's `<Code>` and `<Message>`): no XML crate for that.

/// The inner text of every `<tag>…</tag>` element (no attributes, no nesting of the same tag).
pub fn xml_elements<'a>(xml: &'a str, tag: &str) -> Vec<&'a str> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(&close) else { break };
        out.push(&after[..end]);
        rest = &after[end + close.len()..];
    }
    out
}

/// The unescaped text of the first `<tag>…</tag>`.
pub fn xml_text(xml: &str, tag: &str) -> Option<String> {
    xml_elements(xml, tag).first().map(|t| {
        t.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
    })
}
