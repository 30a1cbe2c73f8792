//! The custom-resource half of the fake API server ([`super`]): what the real API server does
//! with a write to a custom resource, derived from the CRD itself, not written down a second time.
//! The CRDs are the ones openshift/api generates for `infrastructures.config.openshift.io`,
//! vendored in `tests/fixtures/openshift/`, and HyperShift's and Cluster API's in
//! `tests/fixtures/hypershift/` and `tests/fixtures/cluster-api/` ([`SERVED_CRDS`]; each file's
//! header: repo, path, commit).
//!
//! Sources, all in the Kubernetes documentation
//! (<https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/>)
//! and the apiextensions-apiserver code it describes:
//!
//! - **Pruning** ("Field pruning"): a field the structural schema does not specify is dropped when
//!   the object is decoded, in every object without `x-kubernetes-preserve-unknown-fields: true`;
//!   at the root `apiVersion`, `kind` and `metadata` are kept, and `metadata` keeps only the
//!   fields of ObjectMeta. With `fieldValidation=Warn` (the server's default) each dropped field is
//!   a `Warning` header `unknown field "<path>"`; with `Strict` it is a 400
//!   ("Field validation for create, update and patch" in API concepts).
//! - **Defaulting and nullable** ("Defaulting", "Defaulting and Nullable"): a `null` of a field that
//!   is not `nullable` and has no default is pruned; then each absent (or non-nullable `null`)
//!   property with a `default` gets it, outside in (`schema/defaulting/prunenulls.go`,
//!   `algorithm.go`).
//! - **Validation** ("Validation"): OpenAPI v3 `type`, `required`, `enum`, `maxItems`/`minItems`,
//!   `maxLength`/`minLength` (characters), `pattern` (Go RE2; the `regex` crate agrees on these
//!   patterns), `maximum`/`minimum`, turned into field errors as `ConvertToFieldErrors`
//!   (`apiserver/validation/validation.go`) does; then the `x-kubernetes-validations` CEL rules
//!   ("Validation rules"), unless a type, required, enum or size error already exists
//!   (`hasBlockingErr` in `registry/customresource/strategy.go`, which then adds
//!   `<nil>: Invalid value: "null": some validation rules were not checked …`). A rule that
//!   names `oldSelf` is a transition rule: it runs only on an update whose old object has a value
//!   at the same place ("Transition rules").
//! - **Errors**: a 422 `Status` with reason `Invalid`, built as `apierrors.NewInvalid` does (message
//!   `<Kind>.<group> "<name>" is invalid: <error>` or `[<error>, <error>]`; one cause per error
//!   with `reason` `FieldValue…`, the error body as `message` and the path as `field`), the
//!   error bodies as `field.Error.ErrorBody` prints them.
//!
//! The CEL rules run in cel-rust (the `cel` crate), with `self`, `oldSelf` and Kubernetes'
//! `isURL`; [`CEL_RULES`] lists the few evaluated by hand instead (keyed by their exact text: the
//! Infrastructure CRD's, and two in CEL's optional syntax, which cel-rust does not parse). A rule
//! the fake reaches and cannot run is an error (HTTP 500), never a pass; `tests/kube_crd.rs`
//! checks that every rule on the tag paths runs.
//!
//! Not enforced (none occurs on the tag paths; the same test checks that): `format`, `anyOf`, the
//! uniqueness of `x-kubernetes-list-type: set|map` lists, and validation ratcheting (every object
//! the fake stores was validated, so an unchanged invalid value cannot exist).

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::{json, Value};

/// The vendored CRD, relative to the workspace root.
pub const INFRASTRUCTURES_CRD: &str =
    "tests/fixtures/openshift/0000_10_config-operator_01_infrastructures-Default.crd.yaml";

/// The other vendored CRDs the fake serves, relative to the workspace root: HyperShift's
/// `HostedCluster` and `NodePool` (openshift/hypershift) and Cluster API's `AWSCluster`,
/// `AWSMachineTemplate`, `AWSMachinePool`, `AWSManagedControlPlane` (kubernetes-sigs/cluster-api-provider-aws),
/// `AzureCluster` (kubernetes-sigs/cluster-api-provider-azure), `GCPCluster`
/// (kubernetes-sigs/cluster-api-provider-gcp), `MachineDeployment` and
/// `KubeadmControlPlane` (kubernetes-sigs/cluster-api); each file's header names its commit.
pub const SERVED_CRDS: &[&str] = &[
    "tests/fixtures/hypershift/hostedclusters-Hypershift-TechPreviewNoUpgrade.crd.yaml",
    "tests/fixtures/hypershift/nodepools-TechPreviewNoUpgrade.crd.yaml",
    "tests/fixtures/cluster-api/infrastructure.cluster.x-k8s.io_awsclusters.yaml",
    "tests/fixtures/cluster-api/infrastructure.cluster.x-k8s.io_awsmachinetemplates.yaml",
    "tests/fixtures/cluster-api/infrastructure.cluster.x-k8s.io_azureclusters.yaml",
    "tests/fixtures/cluster-api/infrastructure.cluster.x-k8s.io_gcpclusters.yaml",
    "tests/fixtures/cluster-api/cluster.x-k8s.io_machinedeployments.yaml",
    "tests/fixtures/cluster-api/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml",
    "tests/fixtures/cluster-api/infrastructure.cluster.x-k8s.io_awsmachinepools.yaml",
    "tests/fixtures/cluster-api/controlplane.cluster.x-k8s.io_awsmanagedcontrolplanes.yaml",
];

/// Schema keywords the fake enforces (or that carry no rule: `description`).
const ENFORCED: &[&str] = &[
    "description",
    "type",
    "properties",
    "items",
    "additionalProperties",
    "required",
    "enum",
    "maxItems",
    "minItems",
    "maxLength",
    "minLength",
    "maximum",
    "minimum",
    "pattern",
    "nullable",
    "default",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
    "maxProperties",
    "minProperties",
    "x-kubernetes-int-or-string",
];

/// Schema keywords the CRD uses that the fake does not enforce. `x-kubernetes-list-type: atomic`
/// has nothing to enforce; `set` and `map` (item uniqueness) are not enforced.
pub const NOT_ENFORCED: &[&str] =
    &["format", "anyOf", "allOf", "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type"];

/// ObjectMeta's fields: all `metadata` keeps of what a client sends.
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// AWS tag key and value (openshift/api `AWSResourceTag`).
const AWS_TAG_CHARS: &str = "self.matches('^[0-9A-Za-z_.:/=+-@ ]+$')";
/// Azure and GCP tag lists: no element added, removed or changed.
const IMMUTABLE_LIST: &str = "self.all(x, x in oldSelf) && oldSelf.all(x, x in self)";
/// Azure platform status: the tag list can be neither added nor removed after installation.
const AZURE_TAGS_FIXED: &str =
    "!has(oldSelf.resourceTags) && !has(self.resourceTags) || has(oldSelf.resourceTags) && has(self.resourceTags)";
/// ipFamily, dnsType, loadBalancer.type, resourceGroup: set once.
const SET_ONCE: &str = "oldSelf == '' || self == oldSelf";
/// cloudLoadBalancerConfig (a default in every AWS and Azure status).
const CLUSTER_HOSTED_ONLY: &str =
    "has(self.dnsType) && self.dnsType != 'ClusterHosted' ? !has(self.clusterHosted) : true";
/// spec.platformSpec, on every update of the main resource.
const VSPHERE_DAY2_VCENTERS: &str =
    "!has(oldSelf.vsphere) && has(self.vsphere) ? (has(self.vsphere.vcenters) && size(self.vsphere.vcenters) < 2) : true";

/// The CEL rules the fake evaluates (by hand, in [`eval_rule`]).
/// HostedCluster `spec` (hypershift CRD): the two rules in CEL's optional syntax.
const HC_AZURE_OAUTH_ROUTE: &str = r#"self.platform.type != "Azure" || self.platform.?azure.azureAuthenticationConfig.azureAuthenticationConfigType.orValue("") == "WorkloadIdentities" || self.services.exists(s, s.service == "OAuthServer" && s.servicePublishingStrategy.type == "Route")"#;
const HC_AZURE_OAUTH_WORKLOAD: &str = r#"self.platform.type != "Azure" || self.platform.?azure.azureAuthenticationConfig.azureAuthenticationConfigType.orValue("") != "WorkloadIdentities" || self.services.exists(s, s.service == "OAuthServer" && (s.servicePublishingStrategy.type == "Route" || s.servicePublishingStrategy.type == "LoadBalancer"))"#;

/// The rules evaluated by hand (the Infrastructure CRD's, written before the interpreter, and
/// the two cel-rust cannot parse); every other rule goes to cel-rust ([`interpret`]).
pub const CEL_RULES: &[&str] = &[
    AWS_TAG_CHARS,
    IMMUTABLE_LIST,
    AZURE_TAGS_FIXED,
    SET_ONCE,
    CLUSTER_HOSTED_ONLY,
    VSPHERE_DAY2_VCENTERS,
    HC_AZURE_OAUTH_ROUTE,
    HC_AZURE_OAUTH_WORKLOAD,
];

/// `field.ErrorType`: the cause's `reason` and the words the error body starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    Invalid,
    TypeInvalid,
    Required,
    TooLong,
    TooMany,
    NotSupported,
}

impl ErrorType {
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::NotSupported => "FieldValueNotSupported",
        }
    }

    fn words(self) -> &'static str {
        match self {
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::Required => "Required value",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::NotSupported => "Unsupported value",
        }
    }

    /// `hasBlockingErr`: after these, the CEL rules are not evaluated.
    fn blocks_cel(self) -> bool {
        matches!(
            self,
            ErrorType::NotSupported
                | ErrorType::Required
                | ErrorType::TooLong
                | ErrorType::TooMany
                | ErrorType::TypeInvalid
        )
    }
}

/// One `field.Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub kind: ErrorType,
    /// `status.platformStatus.aws.resourceTags[0].key`; `<nil>` for the object as a whole.
    pub field: String,
    /// The bad value as Go prints it (`%q` for a string); `None` where the body omits it.
    pub bad: Option<String>,
    pub detail: String,
}

impl FieldError {
    fn new(kind: ErrorType, field: &str, bad: Option<String>, detail: impl Into<String>) -> FieldError {
        FieldError { kind, field: field.to_string(), bad, detail: detail.into() }
    }

    /// `ErrorBody()`: `Invalid value: "a*b": <detail>`, `Required value`, `Too long: <detail>`.
    pub fn body(&self) -> String {
        let mut s = match (&self.bad, self.kind) {
            (_, ErrorType::Required | ErrorType::TooLong) | (None, _) => self.kind.words().to_string(),
            (Some(bad), _) => format!("{}: {bad}", self.kind.words()),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// `Error()`: `<field>: <body>`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

/// Why a write is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 422: the object breaks the CRD.
    Invalid(Vec<FieldError>),
    /// The fake reached a CEL rule (or a rule option) it does not implement: it cannot say what
    /// the real server would answer, so it says so (HTTP 500) instead of letting the write pass.
    Unimplemented(CelError),
}

/// Why the fake cannot run a CEL rule: its text is what the fake answers (HTTP 500) and what a
/// test prints, so each variant keeps the message a person needs to find the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// A rule option (`messageExpression`, `reason`, …) the fake does not implement.
    #[error("the fake API server does not implement {option} (rule {rule:?} at {at})")]
    UnimplementedOption { option: &'static str, rule: String, at: String },
    /// A rule that failed, with where it sits in the schema.
    #[error("{source} (at {at})")]
    At { source: Box<CelError>, at: String },
    /// A value of a type a hand-run rule cannot take (a bug in the fake: the schema checks run
    /// first and block the rules on a type error).
    #[error("CEL rule {rule:?}: unexpected value {this} (old {old:?})")]
    UnexpectedValue { rule: String, this: Value, old: Option<Value> },
    /// A rule cel-rust cannot parse (cel-rust's message).
    #[error("{0}")]
    Unparsable(String),
    /// The same, met while validating a write.
    #[error("the fake API server cannot parse the CEL rule {rule:?}: {message}")]
    CannotParse { rule: String, message: String },
    /// `self` or `oldSelf` that cel-rust cannot take as a CEL value.
    #[error("CEL rule {rule:?}: {message}")]
    Conversion { rule: String, message: String },
    /// A rule that yields something other than a boolean (cel-rust's value, as `{:?}`).
    #[error("CEL rule {rule:?} yielded {value}, not a boolean")]
    NotBoolean { rule: String, value: String },
    /// A rule cel-rust could not run on this value.
    #[error("CEL rule {rule:?} on {this}: {message}")]
    Execution { rule: String, this: Value, message: String },
}

/// One `x-kubernetes-validations` rule and where it sits in the schema.
#[derive(Debug, Clone)]
pub struct RuleSite {
    /// `status.platformStatus.aws.resourceTags[].key`; `""` for the root.
    pub path: String,
    pub rule: String,
    pub message: Option<String>,
}

pub struct Crd {
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub version: String,
    /// `<group>/<version>`.
    pub api_version: String,
    /// `spec.scope: Namespaced` (else cluster-scoped).
    pub namespaced: bool,
    pub status_subresource: bool,
    schema: Value,
    patterns: HashMap<String, Regex>,
}

impl Crd {
    /// The vendored Infrastructure CRD, parsed once per test process.
    pub fn infrastructures() -> &'static Crd {
        static CRD: OnceLock<Crd> = OnceLock::new();
        CRD.get_or_init(|| Crd::load(INFRASTRUCTURES_CRD))
    }

    /// Every CRD the fake API server serves, each parsed once per test process: the
    /// Infrastructure CRD and those of HyperShift and Cluster API ([`SERVED_CRDS`]).
    pub fn served() -> &'static [Crd] {
        static CRDS: OnceLock<Vec<Crd>> = OnceLock::new();
        CRDS.get_or_init(|| std::iter::once(&INFRASTRUCTURES_CRD).chain(SERVED_CRDS).map(|p| Crd::load(p)).collect())
    }

    /// The served CRD of resource `plural`.
    pub fn by_plural(plural: &str) -> Option<&'static Crd> {
        Crd::served().iter().find(|c| c.plural == plural)
    }

    /// The served CRD at `/apis/<group>/<version>/…/<plural>`.
    pub fn at(group: &str, version: &str, plural: &str) -> Option<&'static Crd> {
        Crd::served().iter().find(|c| c.group == group && c.version == version && c.plural == plural)
    }

    /// Parse a CRD manifest (relative to the workspace root). Panics on a schema keyword this fake
    /// knows nothing about, or a pattern that does not compile: a CRD it would misread.
    pub fn load(relative: &str) -> Crd {
        let path = crate::workspace::workspace_root().join(relative);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let crd: Value = serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(crd["kind"], "CustomResourceDefinition", "{}", path.display());
        let spec = &crd["spec"];
        let versions = spec["versions"].as_array().expect("spec.versions");
        let version = versions
            .iter()
            .find(|v| v["storage"] == true && v["served"] == true)
            .unwrap_or_else(|| panic!("{}: no served storage version", path.display()));
        let schema = version["schema"]["openAPIV3Schema"].clone();
        let group = spec["group"].as_str().expect("spec.group").to_string();
        let version_name = version["name"].as_str().expect("version name").to_string();
        let mut crd = Crd {
            api_version: format!("{group}/{version_name}"),
            namespaced: spec["scope"] == "Namespaced",
            group,
            kind: spec["names"]["kind"].as_str().expect("spec.names.kind").to_string(),
            plural: spec["names"]["plural"].as_str().expect("spec.names.plural").to_string(),
            version: version_name,
            status_subresource: version["subresources"].get("status").is_some(),
            schema,
            patterns: HashMap::new(),
        };
        let mut patterns = HashMap::new();
        for (at, keyword, value) in crd.keywords() {
            assert!(
                ENFORCED.contains(&keyword.as_str()) || NOT_ENFORCED.contains(&keyword.as_str()),
                "{}: schema keyword {keyword:?} at {at:?} is unknown to the fake API server",
                path.display()
            );
            if keyword == "pattern" {
                let p = value.as_str().expect("pattern is a string").to_string();
                let re = Regex::new(&p).unwrap_or_else(|e| panic!("pattern {p:?} at {at}: {e}"));
                patterns.insert(p, re);
            }
        }
        crd.patterns = patterns;
        crd
    }

    /// `Infrastructure.config.openshift.io`, as `is invalid` messages name the kind.
    pub fn qualified_kind(&self) -> String {
        format!("{}.{}", self.kind, self.group)
    }

    /// `infrastructures.config.openshift.io`, as `not found` and `forbidden` name the resource.
    pub fn qualified_resource(&self) -> String {
        format!("{}.{}", self.plural, self.group)
    }

    /// The schema node at a schema path (`status.platformStatus.aws.resourceTags[].key`).
    pub fn schema_at(&self, path: &str) -> Option<&Value> {
        let mut node = &self.schema;
        for part in path.split('.').filter(|p| !p.is_empty()) {
            let (name, items) = match part.strip_suffix("[]") {
                Some(n) => (n, true),
                None => (part, false),
            };
            node = node.get("properties")?.get(name)?;
            if items {
                node = node.get("items")?;
            }
        }
        Some(node)
    }

    /// Every schema keyword with its schema path and value.
    pub fn keywords(&self) -> Vec<(String, String, Value)> {
        let mut out = Vec::new();
        walk_schema(&self.schema, "", &mut |path, node| {
            for (k, v) in node.as_object().into_iter().flatten() {
                out.push((path.to_string(), k.clone(), v.clone()));
            }
        });
        out
    }

    /// Every CEL rule in the schema.
    pub fn rules(&self) -> Vec<RuleSite> {
        let mut out = Vec::new();
        walk_schema(&self.schema, "", &mut |path, node| {
            for r in node.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten() {
                out.push(RuleSite {
                    path: path.to_string(),
                    rule: r["rule"].as_str().unwrap_or_default().to_string(),
                    message: r["message"].as_str().map(str::to_owned),
                });
            }
        });
        out
    }

    /// What decoding a request body does to it: unknown fields pruned (returned, as the
    /// `unknown field` warnings name them), then non-nullable nulls pruned and defaults applied.
    pub fn decode(&self, object: &mut Value) -> Vec<String> {
        let mut unknown = Vec::new();
        if let Some(map) = object.as_object_mut() {
            for (k, v) in map.iter_mut() {
                if k == "metadata" {
                    if let Some(meta) = v.as_object_mut() {
                        let extra: Vec<String> =
                            meta.keys().filter(|k| !OBJECT_META.contains(&k.as_str())).cloned().collect();
                        for k in extra {
                            meta.remove(&k);
                            unknown.push(format!("metadata.{k}"));
                        }
                    }
                }
            }
            let props = self.schema.get("properties").and_then(Value::as_object);
            let extra: Vec<String> = map
                .keys()
                .filter(|k| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
                .filter(|k| props.is_none_or(|p| !p.contains_key(*k)))
                .cloned()
                .collect();
            for k in extra {
                map.remove(&k);
                unknown.push(k);
            }
            for (k, v) in map.iter_mut() {
                if k == "metadata" {
                    continue;
                }
                if let Some(s) = props.and_then(|p| p.get(k)) {
                    prune(s, v, k, &mut unknown);
                }
            }
        }
        prune_nulls(object, Some(&self.schema));
        apply_defaults(object, &self.schema);
        unknown
    }

    /// The object against the schema, then (unless that already failed in a way that blocks
    /// them) the CEL rules, with `old` as `oldSelf` on an update.
    pub fn validate(&self, new: &Value, old: Option<&Value>) -> Result<(), Refusal> {
        let mut errs = Vec::new();
        self.check(&self.schema, new, "", &mut errs);
        if errs.iter().any(|e| e.kind.blocks_cel()) {
            errs.push(FieldError::new(
                ErrorType::Invalid,
                "<nil>",
                Some("\"null\"".to_string()),
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ));
        } else {
            cel(&self.schema, new, old, "", &mut errs).map_err(Refusal::Unimplemented)?;
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(Refusal::Invalid(errs))
        }
    }

    /// The 422 `Status` for `errs` (`apierrors.NewInvalid`).
    pub fn invalid_status(&self, name: &str, errs: &[FieldError]) -> Value {
        let mut messages: Vec<String> = Vec::new();
        for e in errs {
            let m = e.message();
            if !messages.contains(&m) {
                messages.push(m);
            }
        }
        let all = match messages.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes: Vec<Value> =
            errs.iter().map(|e| json!({"reason": e.kind.reason(), "message": e.body(), "field": e.field})).collect();
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("{} \"{name}\" is invalid: {all}", self.qualified_kind()),
            "reason": "Invalid",
            "details": {"name": name, "group": self.group, "kind": self.kind, "causes": causes},
            "code": 422
        })
    }

    fn check(&self, schema: &Value, value: &Value, path: &str, errs: &mut Vec<FieldError>) {
        if value.is_null() && schema["nullable"] == true {
            return;
        }
        if let Some(t) = schema["type"].as_str() {
            if !type_matches(t, value) {
                let actual = type_name(value);
                errs.push(FieldError::new(
                    ErrorType::TypeInvalid,
                    path,
                    Some(go_value(value)),
                    format!("{path} in body must be of type {t}: \"{actual}\""),
                ));
                return;
            }
        }
        // "x-kubernetes-int-or-string: true" (structural schemas: no `type`, an integer or a string).
        if schema["x-kubernetes-int-or-string"] == true && !(value.is_i64() || value.is_u64() || value.is_string()) {
            errs.push(FieldError::new(
                ErrorType::TypeInvalid,
                path,
                Some(go_value(value)),
                format!("{path} in body must be of type integer,string: \"{}\"", type_name(value)),
            ));
            return;
        }
        if let Some(allowed) = schema["enum"].as_array() {
            if !allowed.contains(value) {
                let list: Vec<String> = allowed
                    .iter()
                    .map(|a| a.as_str().map(go_quote).unwrap_or_else(|| go_quote(&a.to_string())))
                    .collect();
                errs.push(FieldError::new(
                    ErrorType::NotSupported,
                    path,
                    Some(go_value(value)),
                    format!("supported values: {}", list.join(", ")),
                ));
            }
        }
        match value {
            Value::Object(map) => {
                // kube-openapi's object validator: `TooManyProperties` / `TooFewProperties`.
                if let Some(max) = schema["maxProperties"].as_u64() {
                    if map.len() as u64 > max {
                        errs.push(FieldError::new(
                            ErrorType::TooMany,
                            path,
                            Some(map.len().to_string()),
                            format!("must have at most {max} items"),
                        ));
                    }
                }
                if let Some(min) = schema["minProperties"].as_u64() {
                    if (map.len() as u64) < min {
                        errs.push(FieldError::new(
                            ErrorType::Invalid,
                            path,
                            Some(go_value(value)),
                            format!("{path} in body should have at least {min} properties"),
                        ));
                    }
                }
                for r in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                    if !map.contains_key(r) {
                        errs.push(FieldError::new(ErrorType::Required, &child(path, r), None, ""));
                    }
                }
                for (k, v) in map {
                    if path.is_empty() && k == "metadata" {
                        continue;
                    }
                    if let Some(s) = schema["properties"].get(k) {
                        self.check(s, v, &child(path, k), errs);
                    } else if let Some(s) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                        self.check(s, v, &format!("{path}[{k}]"), errs);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(max) = schema["maxItems"].as_u64() {
                    if items.len() as u64 > max {
                        errs.push(FieldError::new(
                            ErrorType::TooMany,
                            path,
                            Some(items.len().to_string()),
                            format!("must have at most {max} items"),
                        ));
                    }
                }
                if let Some(min) = schema["minItems"].as_u64() {
                    if (items.len() as u64) < min {
                        errs.push(FieldError::new(
                            ErrorType::Invalid,
                            path,
                            Some(go_value(value)),
                            format!("{path} in body should have at least {min} items"),
                        ));
                    }
                }
                if let Some(s) = schema.get("items") {
                    for (i, item) in items.iter().enumerate() {
                        self.check(s, item, &format!("{path}[{i}]"), errs);
                    }
                }
            }
            Value::String(s) => {
                let chars = s.chars().count() as u64;
                if let Some(max) = schema["maxLength"].as_u64() {
                    if chars > max {
                        errs.push(FieldError::new(
                            ErrorType::TooLong,
                            path,
                            None,
                            format!("may not be more than {max} bytes"),
                        ));
                    }
                }
                if let Some(min) = schema["minLength"].as_u64() {
                    if chars < min {
                        errs.push(FieldError::new(
                            ErrorType::Invalid,
                            path,
                            Some(go_quote(s)),
                            format!("{path} in body should be at least {min} chars long"),
                        ));
                    }
                }
                if let Some(p) = schema["pattern"].as_str() {
                    let re = self.patterns.get(p).expect("every pattern compiled at load");
                    if !re.is_match(s) {
                        errs.push(FieldError::new(
                            ErrorType::Invalid,
                            path,
                            Some(go_quote(s)),
                            format!("{path} in body should match '{p}'"),
                        ));
                    }
                }
            }
            Value::Number(n) => {
                let x = n.as_f64().unwrap_or_default();
                if let Some(max) = schema["maximum"].as_f64() {
                    if x > max {
                        errs.push(FieldError::new(
                            ErrorType::Invalid,
                            path,
                            Some(n.to_string()),
                            format!("{path} in body should be less than or equal to {}", schema["maximum"]),
                        ));
                    }
                }
                if let Some(min) = schema["minimum"].as_f64() {
                    if x < min {
                        errs.push(FieldError::new(
                            ErrorType::Invalid,
                            path,
                            Some(n.to_string()),
                            format!("{path} in body should be greater than or equal to {}", schema["minimum"]),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// Visit every schema node with its schema path (`a.b[].c`; `{}` for additionalProperties).
fn walk_schema(node: &Value, path: &str, visit: &mut dyn FnMut(&str, &Value)) {
    visit(path, node);
    for (k, s) in node.get("properties").and_then(Value::as_object).into_iter().flatten() {
        walk_schema(s, &child(path, k), visit);
    }
    if let Some(items) = node.get("items") {
        walk_schema(items, &format!("{path}[]"), visit);
    }
    if let Some(a) = node.get("additionalProperties").filter(|a| a.is_object()) {
        walk_schema(a, &format!("{path}{{}}"), visit);
    }
}

/// Drop what the schema does not specify (structural pruning), below the root.
fn prune(schema: &Value, value: &mut Value, path: &str, unknown: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let preserve = schema["x-kubernetes-preserve-unknown-fields"] == true;
            let additional = schema.get("additionalProperties");
            let mut drop = Vec::new();
            for (k, v) in map.iter_mut() {
                if let Some(s) = schema["properties"].get(k) {
                    prune(s, v, &child(path, k), unknown);
                } else if let Some(s) = additional.filter(|a| a.is_object()) {
                    prune(s, v, &format!("{path}[{k}]"), unknown);
                } else if !(preserve || additional == Some(&Value::Bool(true))) {
                    drop.push(k.clone());
                }
            }
            for k in drop {
                map.remove(&k);
                unknown.push(child(path, &k));
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune(s, item, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

fn field_schema<'a>(schema: Option<&'a Value>, field: &str) -> Option<&'a Value> {
    let s = schema?;
    s.get("properties").and_then(|p| p.get(field)).or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
}

/// `PruneNonNullableNullsWithoutDefaults`.
fn prune_nulls(value: &mut Value, schema: Option<&Value>) {
    match value {
        Value::Object(map) => {
            let drop: Vec<String> = map
                .iter()
                .filter(|(k, v)| {
                    v.is_null()
                        && field_schema(schema, k).is_some_and(|s| s["nullable"] != true && s.get("default").is_none())
                })
                .map(|(k, _)| k.clone())
                .collect();
            for k in drop {
                map.remove(&k);
            }
            for (k, v) in map.iter_mut() {
                prune_nulls(v, field_schema(schema, k));
            }
        }
        Value::Array(items) => {
            let s = schema.and_then(|s| s.get("items"));
            for item in items {
                prune_nulls(item, s);
            }
        }
        _ => {}
    }
}

/// `structuraldefaulting.Default`: this level's defaults first, then each field below.
fn apply_defaults(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(map) => {
            for (k, s) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
                let Some(default) = s.get("default") else { continue };
                let missing = match map.get(k) {
                    None => true,
                    Some(v) => v.is_null() && s["nullable"] != true,
                };
                if missing {
                    map.insert(k.clone(), default.clone());
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(s) = schema["properties"].get(k) {
                    apply_defaults(v, s);
                } else if let Some(s) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                    apply_defaults(v, s);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for item in items {
                    apply_defaults(item, s);
                }
            }
        }
        _ => {}
    }
}

/// The CEL rules of every node, with the old value where one correlates (properties by name;
/// items of `map` lists by their keys and of `set` lists by value; `atomic` list items never).
fn cel(
    schema: &Value,
    new: &Value,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) -> Result<(), CelError> {
    if new.is_null() {
        return Ok(());
    }
    for r in schema.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten() {
        let rule = r["rule"].as_str().unwrap_or_default();
        let at = if path.is_empty() { "<root>" } else { path };
        if rule.contains("oldSelf") && old.is_none() && r["optionalOldSelf"] != true {
            continue;
        }
        for option in ["messageExpression", "reason", "fieldPath", "optionalOldSelf"] {
            if r.get(option).is_some() {
                return Err(CelError::UnimplementedOption { option, rule: rule.to_string(), at: at.to_string() });
            }
        }
        if !eval_rule(rule, new, old).map_err(|e| CelError::At { source: Box::new(e), at: at.to_string() })? {
            let detail = match r["message"].as_str() {
                Some(m) if !m.is_empty() => m.to_string(),
                _ => format!("failed rule: {}", rule.trim()),
            };
            let t = schema["type"].as_str().unwrap_or("object");
            errs.push(FieldError::new(ErrorType::Invalid, path, Some(go_quote(t)), detail));
        }
    }
    match new {
        Value::Object(map) => {
            for (k, v) in map {
                if path.is_empty() && k == "metadata" {
                    continue;
                }
                let old_v = old.and_then(|o| o.get(k));
                if let Some(s) = schema["properties"].get(k) {
                    cel(s, v, old_v, &child(path, k), errs)?;
                } else if let Some(s) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                    cel(s, v, old_v, &format!("{path}[{k}]"), errs)?;
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                let old_items = old.and_then(Value::as_array);
                let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                for (i, item) in items.iter().enumerate() {
                    let old_item = match (schema["x-kubernetes-list-type"].as_str(), old_items) {
                        (Some("map"), Some(o)) => o.iter().find(|x| keys.iter().all(|k| x.get(*k) == item.get(*k))),
                        (Some("set"), Some(o)) => o.iter().find(|x| *x == item),
                        _ => None,
                    };
                    cel(s, item, old_item, &format!("{path}[{i}]"), errs)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `has(x.f)` on an object.
fn has(v: &Value, field: &str) -> bool {
    v.get(field).is_some_and(|x| !x.is_null())
}

/// The rules of [`CEL_RULES`], by hand. `Err` for any other rule, or a value of a type the rule
/// cannot take (the schema checks run first and block the rules on a type error, so that is a
/// bug in the fake, reported as one).
pub fn eval_rule(rule: &str, this: &Value, old: Option<&Value>) -> Result<bool, CelError> {
    let wrong = || CelError::UnexpectedValue { rule: rule.to_string(), this: this.clone(), old: old.cloned() };
    let old_value = || old.ok_or_else(wrong);
    match rule {
        AWS_TAG_CHARS => {
            static RE: OnceLock<Regex> = OnceLock::new();
            let re = RE.get_or_init(|| Regex::new("^[0-9A-Za-z_.:/=+-@ ]+$").expect("AWS tag pattern"));
            Ok(re.is_match(this.as_str().ok_or_else(wrong)?))
        }
        IMMUTABLE_LIST => {
            let (new, old) = (this.as_array().ok_or_else(wrong)?, old_value()?.as_array().ok_or_else(wrong)?);
            Ok(new.iter().all(|x| old.contains(x)) && old.iter().all(|x| new.contains(x)))
        }
        AZURE_TAGS_FIXED => {
            let old = old_value()?;
            Ok(!has(old, "resourceTags") && !has(this, "resourceTags")
                || has(old, "resourceTags") && has(this, "resourceTags"))
        }
        SET_ONCE => {
            let (new, old) = (this.as_str().ok_or_else(wrong)?, old_value()?.as_str().ok_or_else(wrong)?);
            Ok(old.is_empty() || new == old)
        }
        CLUSTER_HOSTED_ONLY => Ok(if has(this, "dnsType") && this["dnsType"] != "ClusterHosted" {
            !has(this, "clusterHosted")
        } else {
            true
        }),
        VSPHERE_DAY2_VCENTERS => {
            let old = old_value()?;
            Ok(if !has(old, "vsphere") && has(this, "vsphere") {
                has(&this["vsphere"], "vcenters") && this["vsphere"]["vcenters"].as_array().is_some_and(|v| v.len() < 2)
            } else {
                true
            })
        }
        HC_AZURE_OAUTH_ROUTE | HC_AZURE_OAUTH_WORKLOAD => {
            // The CEL optional syntax (`.?azure…orValue("")`), which cel-rust does not parse:
            // both rules hold whenever the platform is not Azure; on Azure, by hand.
            let platform = &this["platform"];
            if platform["type"] != "Azure" {
                return Ok(true);
            }
            let workload = platform
                .pointer("/azure/azureAuthenticationConfig/azureAuthenticationConfigType")
                .and_then(Value::as_str)
                == Some("WorkloadIdentities");
            let oauth = |types: &[&str]| {
                this["services"].as_array().into_iter().flatten().any(|s| {
                    s["service"] == "OAuthServer" && types.iter().any(|t| s["servicePublishingStrategy"]["type"] == *t)
                })
            };
            Ok(if rule == HC_AZURE_OAUTH_ROUTE {
                workload || oauth(&["Route"])
            } else {
                !workload || oauth(&["Route", "LoadBalancer"])
            })
        }
        _ => interpret(rule, this, old),
    }
}

/// Whether the fake can run `rule`: by hand, or parsed by cel-rust.
pub fn runnable(rule: &str) -> Result<(), CelError> {
    if CEL_RULES.contains(&rule) {
        return Ok(());
    }
    cel::Program::compile(rule).map(drop).map_err(|e| CelError::Unparsable(e.to_string()))
}

/// Any other rule, run by cel-rust with `self` (and `oldSelf` on an update), and Kubernetes'
/// `isURL` from its CEL URL library (k8s.io/apiserver `pkg/cel/library/urls.go`: true when Go's
/// `url.Parse` accepts the string; here: a scheme, then anything without spaces). A rule cel-rust
/// cannot parse or run, or that yields no boolean, is an error (HTTP 500), never a pass.
fn interpret(rule: &str, this: &Value, old: Option<&Value>) -> Result<bool, CelError> {
    let program = cel::Program::compile(rule)
        .map_err(|e| CelError::CannotParse { rule: rule.to_string(), message: e.to_string() })?;
    let mut context = cel::Context::default();
    let value = |v: &Value| {
        cel::to_value(v).map_err(|e| CelError::Conversion { rule: rule.to_string(), message: e.to_string() })
    };
    context.add_variable_from_value("self", value(this)?);
    if let Some(old) = old {
        context.add_variable_from_value("oldSelf", value(old)?);
    }
    let _ = context.add_function("isURL", |s: std::sync::Arc<String>| {
        static RE: OnceLock<Regex> = OnceLock::new();
        RE.get_or_init(|| Regex::new(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$").expect("URL shape")).is_match(&s)
    });
    match program.execute(&context) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(CelError::NotBoolean { rule: rule.to_string(), value: format!("{other:?}") }),
        Err(e) => Err(CelError::Execution { rule: rule.to_string(), this: this.clone(), message: e.to_string() }),
    }
}

fn type_matches(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        _ => true,
    }
}

/// The JSON type as kube-openapi names it in `must be of type` (an integral number is `integer`,
/// as the unstructured decoder makes it an int64).
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A bad value as `ErrorBody` prints it: strings quoted (`%q`), numbers and booleans plain,
/// `null` as `"null"`. (Go prints maps and slices as `%#v`; the fake prints their JSON.)
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "\"null\"".to_string(),
        Value::String(s) => go_quote(s),
        other => other.to_string(),
    }
}

/// Go's `%q` (`strconv.Quote`) for the characters these tests use.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
