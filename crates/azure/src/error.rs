//! Azure errors as [`CloudError`]s: which call on which target failed, the HTTP status and ARM/Storage error code,
//! and a class that says whether a retry can fix it (docs/src/design/architecture.md: a resource not yet visible is
//! retried, then the event is handed back to Event Grid, never dropped).

use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

/// An error response: ARM's `{"error": {"code", "message"}}`, Storage's XML `<Code>`/`<Message>`
/// or the `x-ms-error-code` header, classified by status and code.
pub fn from_response(
    operation: &'static str,
    target: &str,
    status: u16,
    header_code: Option<&str>,
    body: &str,
) -> CloudError {
    let (code, message) = error_code_and_message(body);
    let code = code.or(header_code.map(str::to_owned)).unwrap_or_else(|| format!("Http{status}"));
    let class = classify(status, &code, &message);
    CloudError::azure(operation, target, Some(status), &code, &message, class)
}

/// A request that got no response (connection refused, timeout, TLS).
pub fn transport(operation: &'static str, target: &str, err: &reqwest::Error) -> CloudError {
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    CloudError::azure(operation, target, None, "Transport", &message, ErrorClass::Transient)
}

/// ARM error codes that no retry, redelivery or later sweep can get past until a person acts,
/// whatever their status (ARM answers a lock with 409, which alone would read as "busy"):
/// - `ScopeLocked`: a `ReadOnly` management lock on the resource or a parent scope blocks every
///   write, tags included ("A read-only lock on a resource ... prevents all users from ... updating
///   tags", learn.microsoft.com/azure/azure-resource-manager/management/lock-resources).
/// - `ReadOnlyDisabledSubscription`: the subscription is disabled or expired, so read-only.
/// - `AuthorizationFailed` / `LinkedAuthorizationFailed`: the identity has no role assignment
///   for the action (the second on a linked resource the write touches). Event Grid's retries
///   would only hammer ARM for a day; the sweep picks the resource up once the role is granted.
/// - `InvalidResourceType`: the provider serves no such type (or no Tags API on it).
/// - `DenyAssignmentAuthorizationFailed`: a deny assignment on the scope refuses the action to
///   every principal it does not exclude, whatever their roles ("deny assignments take precedence
///   over role assignments", learn.microsoft.com/azure/role-based-access-control/deny-assignments).
///   ARM answers 403 with this code and a message naming the deny assignment and its scope (the
///   shape seen in recorded answers for managed resource groups; inferred, as no REST spec example
///   carries it). ARO's managed resource group has one that exempts `Microsoft.Resources/tags/*`
///   (ARO-RP `denyAssignment()`), so this names any other deny assignment: only its owner can lift it.
pub const PERMANENT_ARM_CODES: &[&str] = &[
    "ScopeLocked",
    "ReadOnlyDisabledSubscription",
    "AuthorizationFailed",
    "LinkedAuthorizationFailed",
    "InvalidResourceType",
    "DenyAssignmentAuthorizationFailed",
];

/// Classify by the service's error code first, then by HTTP status.
pub fn classify(status: u16, code: &str, message: &str) -> ErrorClass {
    if PERMANENT_ARM_CODES.iter().any(|c| c.eq_ignore_ascii_case(code)) {
        return ErrorClass::Fatal;
    }
    match status {
        429 => ErrorClass::Throttled,
        401 | 403 => ErrorClass::Denied,
        404 => ErrorClass::NotFound,
        408 | 500..=599 => ErrorClass::Transient,
        // RetryableErrorDueToAnotherOperation / Conflict while the resource is `Updating`.
        409 => ErrorClass::Transient,
        405 => ErrorClass::Unsupported,
        400 if is_tag_count(code, message) => ErrorClass::TagLimit,
        _ => ErrorClass::Fatal,
    }
}

/// ARM's refusal for the number of tags, and only that: its texts are "Too many tags on the
/// resource/resource group. Requested tag count - 'N'. Maximum number of tags allowed - 'L'."
/// (code `InvalidTags`) and, in the REST reference, "can have a maximum of 50 tags". A name or
/// value that is too long ("… exceeded the maximum length", `InvalidTagName`,
/// `InvalidTagValueLength`) is a different, permanent refusal and not a limit on the resource.
fn is_tag_count(code: &str, message: &str) -> bool {
    let lc = code.to_ascii_lowercase();
    if ["invalidtagname", "invalidtagvaluelength", "invalidtagnamecharacters"].contains(&lc.as_str()) {
        return false;
    }
    let lm = message.to_ascii_lowercase();
    ["tagcount", "toomanytags", "taglimit", "tagslimit"].iter().any(|c| lc.contains(c))
        || ["too many tags", "maximum number of tags", "requested tag count"].iter().any(|m| lm.contains(m))
        || lm.split("maximum of ").skip(1).any(|rest| {
            let mut words = rest.split_whitespace();
            words.next().is_some_and(|n| n.parse::<u32>().is_ok()) && words.next().is_some_and(|w| w.starts_with("tag"))
        })
}

/// ARM JSON `{"error": {"code", "message"}}` or Storage XML `<Error><Code>…</Code><Message>…`.
fn error_code_and_message(body: &str) -> (Option<String>, String) {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        let e = v.get("error").unwrap_or(&v);
        let code = e.get("code").and_then(|c| c.as_str()).map(str::to_owned);
        let message = e.get("message").and_then(|m| m.as_str()).unwrap_or_default().to_string();
        return (code, message);
    }
    let code = crate::xml::xml_text(body, "Code");
    let message = crate::xml::xml_text(body, "Message").unwrap_or_default();
    let message = message.lines().next().unwrap_or_default().to_string();
    (code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_messages() {
        assert_eq!(classify(429, "TooManyRequests", ""), ErrorClass::Throttled);
        assert_eq!(classify(404, "ResourceNotFound", ""), ErrorClass::NotFound);
        assert_eq!(classify(503, "ServiceUnavailable", ""), ErrorClass::Transient);
        // By code, not status: a lock answers 409, which alone reads as "busy".
        assert_eq!(classify(409, "Conflict", ""), ErrorClass::Transient);
        for code in PERMANENT_ARM_CODES {
            assert_eq!(classify(409, code, ""), ErrorClass::Fatal, "{code}");
        }
        assert_eq!(classify(403, "AuthorizationFailed", ""), ErrorClass::Fatal);
        assert_eq!(classify(401, "InvalidAuthenticationToken", ""), ErrorClass::Denied);
        assert_eq!(classify(400, "InvalidTagCount", ""), ErrorClass::TagLimit);
        assert_eq!(classify(400, "BadRequest", "the resource can have a maximum of 50 tags"), ErrorClass::TagLimit);
        assert_eq!(classify(400, "InvalidTagNameCharacters", "name contains <"), ErrorClass::Fatal);
        // ARM's own wording of the count refusal (Azure's documentation; the fake's arm_rules).
        let too_many = "Too many tags on the resource/resource group. Requested tag count - '17'. Maximum number of tags allowed - '15'.";
        assert_eq!(classify(400, "InvalidTags", too_many), ErrorClass::TagLimit);
        assert_eq!(classify(400, "BadRequest", too_many), ErrorClass::TagLimit);
        // A value or name that is too long is not the resource's tag limit: it is permanent.
        let long_value = "Tag value too large. Following tag value 'x' exceeded the maximum length. Maximum allowed length for tag value - '256' characters.";
        assert_eq!(classify(400, "InvalidTagValueLength", long_value), ErrorClass::Fatal);
        assert_eq!(
            classify(400, "InvalidTagName", "Maximum allowed length of 128 for tag key exceeded."),
            ErrorClass::Fatal
        );
        assert_eq!(classify(400, "BadRequest", "the tag name exceeds the maximum length"), ErrorClass::Fatal);
        let e = crate::error::from_response(
            "arm:MergeTags",
            "/subscriptions/s/resourceGroups/rg",
            403,
            None,
            r#"{"error":{"code":"AuthorizationFailed","message":"no"}}"#,
        );
        let text = e.to_string();
        assert!(text.contains("HTTP 403 AuthorizationFailed: no"), "{text}");
        assert!(text.contains("tag writer"), "{text}");
        // A deny assignment is permanent whatever roles are granted, and says whose it is.
        let deny = "The client 'x' with object id 'x' has permission to perform action 'Microsoft.Resources/tags/write' on scope '/subscriptions/s/resourceGroups/aro-rg'; however, the access is denied because of the deny assignment with name 'managed-app' and Id 'd-1' at scope '/subscriptions/s/resourceGroups/aro-rg'.";
        assert_eq!(classify(403, "DenyAssignmentAuthorizationFailed", deny), ErrorClass::Fatal);
        let body =
            serde_json::json!({"error": {"code": "DenyAssignmentAuthorizationFailed", "message": deny}}).to_string();
        let text =
            crate::error::from_response("arm:MergeTags", "/subscriptions/s/resourceGroups/aro-rg/x", 403, None, &body)
                .to_string();
        assert!(text.contains("deny assignment with name 'managed-app'") && text.contains("not retried"), "{text}");
        assert!(!text.contains("grant the function"), "no role fixes a deny assignment: {text}");
        let e = crate::error::from_response(
            "blob:GetBlob",
            "http://x/c/b",
            404,
            Some("BlobNotFound"),
            "<?xml version=\"1.0\"?><Error><Code>BlobNotFound</Code><Message>The specified blob does not exist.\nRequestId:1</Message></Error>",
        );
        assert_eq!((e.code.as_str(), e.message.as_str()), ("BlobNotFound", "The specified blob does not exist."));
    }
}
