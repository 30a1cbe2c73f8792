//! What ARM's Tags API refuses, as the fake ARM applies it to every `PUT`/`PATCH` on
//! `{resourceId}/providers/Microsoft.Resources/tags/default`. Each rule names its source; the
//! shorthands:
//!
//! - **[S20]** `tag-resources.md`, section "Limitations" (learn.microsoft.com, the 2024–2025 text);
//! - **[S20b]** `tag-support.md` (the per-type "Supports tags" table and its notes);
//! - **[S19a]** the Tags REST reference ("Update At Scope", "Create Or Update At Scope");
//! - **[RPC]** `Azure/azure-resource-manager-rpc` `v1.0/resource-api-reference.md` (the `tags`
//!   contract every resource provider implements) and `v1.0/common-api-details.md` (the error
//!   envelope `{"error": {"code", "message"}}`);
//! - **[ERR]** ARM's own error codes and message texts as public clients reproduce them: the Azure
//!   CLI docs quote `(InvalidTagNameCharacters) The tag names '…' have reserved characters
//!   '<,>,%,&,\,?,/' …`; Microsoft's Az.Migrate module re-implements ARM's checks with ARM's codes
//!   (`InvalidTagName`, `InvalidTagNameCharacters`, `InvalidTagValueLength`, `InvalidTags`); Azure
//!   Storage's functional tests assert the texts "Maximum allowed length of 128 for tag key
//!   exceeded.", "Too many tags on the resource/resource group. Requested tag count - 'N'. Maximum
//!   number of tags allowed - 'L'." and "Invalid tag format. Ensure that each tag has a unique name."
//!
//! Where no public recording gives ARM's exact code (untaggable types, the PATCH-less types), the
//! code chosen is marked as such; the status class (4xx, not retryable) is what the product may
//! rely on, never the code's spelling.
//!
//! Lengths are counted in UTF-16 code units, as .NET (which ARM runs on) counts `string.Length`.

use tagwarden_core::resource::ResourceRef;

/// An ARM refusal: status, `error.code`, `error.message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

impl Refusal {
    fn bad_request(code: &'static str, message: String) -> Self {
        Refusal { status: 400, code, message }
    }
}

/// Every rule the fake applies, for reports: (rule, source).
pub const RULES: &[(&str, &str)] = &[
    ("tags are a JSON object of strings; operation is Merge, Replace or Delete", "[S19a]"),
    ("untaggable resource types refuse tag writes", "[S20] 'Not all resource types support tags', [S20b] table"),
    ("IP Groups and Firewall Policies refuse PATCH", "[S20] Limitations"),
    ("tag name non-empty, not whitespace only", "[ERR] InvalidTagName"),
    ("tag name without < > % & \\ ? / or control characters", "[S20], [RPC], [ERR] InvalidTagNameCharacters"),
    ("tag name at most 512 characters, 128 on storage accounts", "[S20], [RPC], [ERR] InvalidTagName"),
    ("tag value at most 256 characters", "[S20], [RPC], [ERR] InvalidTagValueLength"),
    ("DNS zones: no spaces or parentheses, no leading digit, ASCII only", "[S20] note, [S20b] network note"),
    ("Traffic Manager: no spaces, # or :, no leading digit; Front Door: no # or :", "[S20] note"),
    ("one request may not name a tag twice in different casing", "[ERR] 'Invalid tag format'"),
    ("names compare case-insensitively: Merge updates the existing tag", "[S20] 'Tag names are case-insensitive'"),
    ("at most 50 tags after the operation; 15 for Automation, CDN, DNS, Private DNS, saved searches", "[S19a], [S20]"),
    (
        "reads may lag behind a write (fake.rs, opt-in: stale_reads_after_write)",
        "ARM docs: eventually consistent reads",
    ),
];

/// Types whose tag-support row says "No" (the ones tagwarden might meet; [S20b]), and classic
/// resources ([S20]: "Classic resources such as Cloud Services don't support tags").
const UNTAGGABLE: &[&str] = &[
    "microsoft.authorization/",
    "microsoft.resources/deployments/operations",
    "microsoft.resources/providers",
    "microsoft.resources/tenants",
    "microsoft.storage/storageaccounts/blobservices",
    "microsoft.storage/storageaccounts/fileservices",
    "microsoft.storage/storageaccounts/queueservices",
    "microsoft.storage/storageaccounts/tableservices",
    "microsoft.servicebus/namespaces/queues",
    "microsoft.servicebus/namespaces/topics",
    "microsoft.sql/servers/firewallrules",
    "microsoft.security/",
    "microsoft.securityinsights/",
    "microsoft.resourcehealth/",
    "microsoft.advisor/",
    "microsoft.classiccompute/",
    "microsoft.classicnetwork/",
    "microsoft.classicstorage/",
];

/// [S20]: "Azure IP Groups and Azure Firewall policies don't support PATCH operations."
const NO_PATCH: &[&str] = &["microsoft.network/ipgroups", "microsoft.network/firewallpolicies"];

/// [S20]: "The following Azure resources only support 15 tags: Azure Automation, Azure Content
/// Delivery Network, Azure Public DNS (Zone and A records), Azure Private DNS (Zone and A
/// records), Azure Log Analytics saved search."
const FIFTEEN: &[&str] = &[
    "microsoft.automation/",
    "microsoft.cdn/",
    "microsoft.network/dnszones",
    "microsoft.network/privatednszones",
    "microsoft.operationalinsights/workspaces/savedsearches",
];

/// The resource type of an ARM ID, lowercase (`""` when the ID is not one).
pub fn kind_of(id: &str) -> String {
    ResourceRef::from_arm_id(id).map(|r| r.kind.to_ascii_lowercase()).unwrap_or_default()
}

fn is(kind: &str, prefixes: &[&str]) -> bool {
    prefixes.iter().any(|p| kind.starts_with(p))
}

/// How many tags a resource of `kind` may carry at the end of an operation.
pub fn limit_for(kind: &str) -> usize {
    if is(kind, FIFTEEN) {
        15
    } else {
        50
    }
}

fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count()
}

/// Checks that need only the request: the resource type, the method, and each given tag.
pub fn refuse_request(kind: &str, method: &str, given: &[(String, String)]) -> Option<Refusal> {
    if is(kind, UNTAGGABLE) {
        // [S20b] "Supports tags: No". ARM's exact code is not in any public recording; the
        // envelope and the 4xx class are what a client may rely on.
        return Some(Refusal::bad_request(
            "ResourceTypeNotSupported",
            format!("The resource type '{kind}' does not support tags."),
        ));
    }
    if method == "PATCH" && is(kind, NO_PATCH) {
        // [S20]; the resource provider's own answer (code not recorded publicly).
        return Some(Refusal {
            status: 405,
            code: "MethodNotAllowed",
            message: "The requested resource does not support http method 'PATCH'.".to_string(),
        });
    }
    let storage = kind == "microsoft.storage/storageaccounts";
    let name_limit = if storage { 128 } else { 512 };
    for (k, v) in given {
        if k.trim().is_empty() {
            return Some(Refusal::bad_request(
                "InvalidTagName",
                "The tag name must be non-null, non-empty and non-whitespace only. Please provide an actual value."
                    .to_string(),
            ));
        }
        if k.chars().any(|c| "<>%&\\?/".contains(c) || c.is_control()) {
            return Some(Refusal::bad_request(
                "InvalidTagNameCharacters",
                format!("The tag names '{k}' have reserved characters '<,>,%,&,\\,?,/' or control characters."),
            ));
        }
        if utf16_len(k) > name_limit {
            let message = if storage {
                "Maximum allowed length of 128 for tag key exceeded.".to_string()
            } else {
                format!("Tag key too large. Following tag name '{k}' exceeded the maximum length. Maximum allowed length for tag name - '512' characters.")
            };
            return Some(Refusal::bad_request("InvalidTagName", message));
        }
        if utf16_len(v) > 256 {
            return Some(Refusal::bad_request(
                "InvalidTagValueLength",
                format!("Tag value too large. Following tag value '{v}' exceeded the maximum length. Maximum allowed length for tag value - '256' characters."),
            ));
        }
        if let Some(why) = type_specific(kind, k) {
            return Some(Refusal::bad_request("InvalidTagNameCharacters", format!("The tag name '{k}' {why}.")));
        }
    }
    for (i, (k, _)) in given.iter().enumerate() {
        if given[..i].iter().any(|(e, _)| e.eq_ignore_ascii_case(k)) {
            return Some(Refusal::bad_request(
                "InvalidTagName",
                "Invalid tag format. Ensure that each tag has a unique name.".to_string(),
            ));
        }
    }
    None
}

/// [S20] notes: what DNS zones, Traffic Manager and Front Door refuse in a tag name.
fn type_specific(kind: &str, name: &str) -> Option<&'static str> {
    let leading_digit = name.starts_with(|c: char| c.is_ascii_digit());
    if is(kind, &["microsoft.network/dnszones", "microsoft.network/privatednszones"]) {
        if name.contains([' ', '(', ')']) || leading_digit || !name.is_ascii() {
            return Some("is not valid for Azure DNS: no spaces, parentheses, leading digit or Unicode characters");
        }
    } else if kind.starts_with("microsoft.network/trafficmanagerprofiles") {
        if name.contains([' ', '#', ':']) || leading_digit {
            return Some("is not valid for Traffic Manager: no spaces, '#', ':' or leading digit");
        }
    } else if kind.starts_with("microsoft.network/frontdoors") && name.contains(['#', ':']) {
        return Some("is not valid for Azure Front Door: no '#' or ':'");
    }
    None
}

/// [S19a] "The specified entity can have a maximum of 50 tags at the end of the operation";
/// [S20] 15 for the types in [`FIFTEEN`]. Message as ARM words it ([ERR]).
pub fn refuse_count(kind: &str, after: usize) -> Option<Refusal> {
    let limit = limit_for(kind);
    (after > limit).then(|| {
        Refusal::bad_request(
            "InvalidTags",
            format!("Too many tags on the resource/resource group. Requested tag count - '{after}'. Maximum number of tags allowed - '{limit}'."),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_documented_refusal() {
        let vm = "microsoft.compute/virtualmachines";
        let ok = |kind: &str, t: &[(&str, &str)]| refuse_request(kind, "PATCH", &tags(t)).is_none();
        let code = |kind: &str, t: &[(&str, &str)]| refuse_request(kind, "PATCH", &tags(t)).map(|r| r.code);
        assert!(ok(vm, &[("kubernetes.io_cluster.x-1", "owned"), ("team", "a/b:c;<>?")]));
        for bad in ["a<b", "a>b", "a%b", "a&b", "a\\b", "a?b", "a/b", "a\u{7}b"] {
            assert_eq!(code(vm, &[(bad, "v")]), Some("InvalidTagNameCharacters"), "{bad:?}");
        }
        assert_eq!(code(vm, &[(" ", "v")]), Some("InvalidTagName"));
        assert!(ok(vm, &[(&"k".repeat(512), "v")]));
        assert_eq!(code(vm, &[(&"k".repeat(513), "v")]), Some("InvalidTagName"));
        // 128 UTF-16 units on storage accounts: 64 astral characters are 128 units.
        let sa = "microsoft.storage/storageaccounts";
        assert!(ok(sa, &[(&"\u{1F600}".repeat(64), "v")]));
        assert_eq!(code(sa, &[(&"k".repeat(129), "v")]), Some("InvalidTagName"));
        assert_eq!(code(vm, &[("k", &"v".repeat(257))]), Some("InvalidTagValueLength"));
        assert_eq!(code(vm, &[("team", "a"), ("Team", "b")]), Some("InvalidTagName"));
        assert_eq!(code("microsoft.network/dnszones", &[("cost center", "v")]), Some("InvalidTagNameCharacters"));
        assert_eq!(code("microsoft.network/privatednszones", &[("1st", "v")]), Some("InvalidTagNameCharacters"));
        assert!(ok("microsoft.network/privatednszones", &[("kubernetes.io_cluster.x-1", "owned")]));
        assert_eq!(code("microsoft.network/trafficmanagerprofiles", &[("a:b", "v")]), Some("InvalidTagNameCharacters"));
        assert_eq!(code("microsoft.network/frontdoors", &[("a#b", "v")]), Some("InvalidTagNameCharacters"));
        assert_eq!(code("microsoft.authorization/roleassignments", &[("k", "v")]), Some("ResourceTypeNotSupported"));
        assert_eq!(code("microsoft.classiccompute/domainnames", &[("k", "v")]), Some("ResourceTypeNotSupported"));
        let r = refuse_request("microsoft.network/firewallpolicies", "PATCH", &tags(&[("k", "v")])).expect("refused");
        assert_eq!((r.status, r.code), (405, "MethodNotAllowed"));
        assert!(refuse_request("microsoft.network/firewallpolicies", "PUT", &tags(&[("k", "v")])).is_none());
        assert_eq!(refuse_count(vm, 50), None);
        assert_eq!(refuse_count(vm, 51).map(|r| r.code), Some("InvalidTags"));
        for small in [
            "microsoft.network/dnszones",
            "microsoft.network/dnszones/a",
            "microsoft.network/privatednszones",
            "microsoft.cdn/profiles",
            "microsoft.automation/automationaccounts",
            "microsoft.operationalinsights/workspaces/savedsearches",
        ] {
            assert_eq!((limit_for(small), refuse_count(small, 16).is_some()), (15, true), "{small}");
        }
        assert_eq!(
            kind_of("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/dnszones/z.com/A/www"),
            "microsoft.network/dnszones/a"
        );
    }
}
