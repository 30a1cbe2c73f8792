//! The Azure function's configuration, read from the environment once at start-up and turned
//! into typed values (a bad value stops the handler before it serves anything, with a message
//! that names the variable and the fix). See `functions/azure-function` for the list.
//!
//! Deliberately not here: building clients (`super::function::Handler::new`) and anything that
//! needs the network.

use std::time::Duration;

use reqwest::Url;

use super::adapter::DEFAULT_CONCURRENCY;
use super::blob_store::BlobLocation;
use tagwarden_engine::config::ConfigError;

pub const DEFAULT_ARM_ENDPOINT: &str = "https://management.azure.com";
pub const DEFAULT_PORT: u16 = 8080;
/// Seconds one HTTP request (ARM, Blob, identity, metrics) may take, well inside the Functions
/// host's own timeout so a stuck call is retried instead of the invocation being killed.
pub const DEFAULT_HTTP_TIMEOUT: u64 = 30;

/// The managed-identity endpoint of App Service (`IDENTITY_ENDPOINT`, `IDENTITY_HEADER`).
#[derive(Clone, PartialEq, Eq)]
pub struct IdentityConfig {
    pub endpoint: Url,
    pub header: String,
    /// `TAGWARDEN_SELF_CLIENT_ID`: the user-assigned identity to request tokens for.
    pub client_id: Option<String>,
}

impl std::fmt::Debug for IdentityConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityConfig")
            .field("endpoint", &self.endpoint.as_str())
            .field("client_id", &self.client_id)
            .finish()
    }
}

/// Where custom metrics go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `https://<region>.monitoring.azure.com`, or `TAGWARDEN_METRICS_ENDPOINT`.
    pub endpoint: Url,
    /// `TAGWARDEN_METRICS_RESOURCE_ID`: the Function App's ARM ID.
    pub resource_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub port: u16,
    pub policy: BlobLocation,
    pub policy_ttl: Duration,
    /// The clusters enforced (`TAGWARDEN_CLUSTERS`): a set's others are never loaded.
    pub clusters: Option<Vec<String>>,
    /// `TAGWARDEN_HTTP_TIMEOUT`: how long one HTTP request may take before it is retried.
    pub http_timeout: Duration,
    pub arm_endpoint: Url,
    /// The token audience for ARM: `TAGWARDEN_ARM_AUDIENCE`, else the known cloud's for
    /// `arm_endpoint` (`crate::arm::arm_audience`).
    pub arm_audience: String,
    pub identity: IdentityConfig,
    /// The function's own identities (principal id, client id): events they caused are ignored.
    pub own: Vec<String>,
    pub metrics: Option<MetricsConfig>,
    /// Subscription, resource-group or management-group IDs the sweep lists owned resources in.
    pub sweep_scopes: Vec<String>,
    /// `TAGWARDEN_RESOURCE_GRAPH`: sweeps list through Azure Resource Graph (`true`, the default),
    /// or through ARM's listing only (`false`: a cloud without Resource Graph, or an identity
    /// without Reader, whose unreadable scopes Resource Graph would leave out without a word).
    pub resource_graph: bool,
    /// `TAGWARDEN_CONCURRENCY`: resources reconciled, and calls in flight, at once in an
    /// invocation (each subscription's Merges are paced apart from it: `super::adapter::WritePacing`).
    pub concurrency: usize,
    /// `TAGWARDEN_EVENT_TOPICS`: the Event Grid topics whose deliveries are accepted, as every
    /// event names its topic (`topic`, CloudEvents `source`); `None` (unset) accepts any
    /// (`super::function::Topics` says why).
    pub event_topics: Option<Vec<String>>,
    /// `TAGWARDEN_YIELD_TO`: the controllers whose changes may contest a key, by the writer an
    /// event names (the caller's UPN, `appid` claim or principal id: a service principal's client
    /// id, so a deployment names CAPZ's own); unset, none (`tagwarden_engine::config::yield_to`).
    pub yield_to: tagwarden_core::contest::YieldTo,
    /// `TAGWARDEN_MODE`: `audit` (evaluate and report everything, write no tag) or `enforce` (the
    /// default when unset; `tagwarden_core::mode`).
    pub mode: tagwarden_core::mode::Mode,
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// The same, from any variable lookup (tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let var = |k: &str| get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let port = match var("FUNCTIONS_CUSTOMHANDLER_PORT") {
            None => DEFAULT_PORT,
            Some(p) => p.parse::<u16>().map_err(|_| ConfigError::Invalid {
                var: "FUNCTIONS_CUSTOMHANDLER_PORT",
                value: p.clone(),
                problem: "is not a TCP port".into(),
                fix: "the Functions host sets it; unset it to use 8080".into(),
            })?,
        };
        let policy = var("TAGWARDEN_POLICY").ok_or_else(|| ConfigError::Missing {
            var: "TAGWARDEN_POLICY",
            fix: "set it to the policy blob's URL, or a blob prefix URL ending in '/'".into(),
        })?;
        // Never echo a SAS back into a log.
        let shown = policy.split('?').next().unwrap_or_default().to_string();
        let policy = policy.parse::<BlobLocation>().map_err(|problem| ConfigError::Invalid {
            var: "TAGWARDEN_POLICY",
            value: shown,
            problem: "is not a blob or blob-prefix URL".into(),
            fix: problem.to_string(),
        })?;
        let policy_ttl = tagwarden_engine::config::policy_ttl(var("POLICY_TTL"))?;
        let clusters = tagwarden_engine::config::clusters(var("TAGWARDEN_CLUSTERS"), policy.is_set)?;
        let http_timeout = match var("TAGWARDEN_HTTP_TIMEOUT") {
            None => DEFAULT_HTTP_TIMEOUT,
            Some(s) => s.parse::<u64>().ok().filter(|n| (1..=600).contains(n)).ok_or_else(|| ConfigError::Invalid {
                var: "TAGWARDEN_HTTP_TIMEOUT",
                value: s.clone(),
                problem: "is not a number of seconds from 1 to 600".into(),
                fix: format!("set it to e.g. {DEFAULT_HTTP_TIMEOUT}, or unset it for the default"),
            })?,
        };
        let arm = var("TAGWARDEN_ARM_ENDPOINT").unwrap_or_else(|| DEFAULT_ARM_ENDPOINT.to_string());
        let arm_endpoint = http_url(&arm).map_err(|problem| ConfigError::Invalid {
            var: "TAGWARDEN_ARM_ENDPOINT",
            value: arm.clone(),
            problem: problem.to_string(),
            fix: "set it to https://management.azure.com (or your cloud's ARM endpoint), or unset it".into(),
        })?;
        let arm_audience = super::arm::arm_audience(&arm_endpoint, var("TAGWARDEN_ARM_AUDIENCE").as_deref());
        let endpoint = var("IDENTITY_ENDPOINT").ok_or_else(|| ConfigError::Missing {
            var: "IDENTITY_ENDPOINT",
            fix: "the function needs a managed identity: assign one to the Function App (App Service sets IDENTITY_ENDPOINT and IDENTITY_HEADER)".into(),
        })?;
        let endpoint = http_url(&endpoint).map_err(|problem| ConfigError::Invalid {
            var: "IDENTITY_ENDPOINT",
            value: endpoint.clone(),
            problem: problem.to_string(),
            fix: "App Service sets it; do not override it".into(),
        })?;
        let header = var("IDENTITY_HEADER").ok_or_else(|| ConfigError::Missing {
            var: "IDENTITY_HEADER",
            fix: "App Service sets it together with IDENTITY_ENDPOINT when a managed identity is assigned".into(),
        })?;
        let client_id = var("TAGWARDEN_SELF_CLIENT_ID");
        let principal_id = var("TAGWARDEN_SELF_PRINCIPAL_ID");
        let own: Vec<String> = [principal_id, client_id.clone()].into_iter().flatten().collect();

        let metrics = match var("TAGWARDEN_METRICS_RESOURCE_ID") {
            None => None,
            Some(resource_id) => {
                if tagwarden_core::resource::ResourceRef::from_arm_id(&resource_id).is_err() {
                    return Err(ConfigError::Invalid {
                        var: "TAGWARDEN_METRICS_RESOURCE_ID",
                        value: resource_id,
                        problem: "is not an ARM resource ID".into(),
                        fix: "set it to the Function App's resource ID (/subscriptions/…/providers/Microsoft.Web/sites/NAME)".into(),
                    });
                }
                let endpoint = match var("TAGWARDEN_METRICS_ENDPOINT") {
                    Some(e) => http_url(&e).map_err(|problem| ConfigError::Invalid {
                        var: "TAGWARDEN_METRICS_ENDPOINT",
                        value: e.clone(),
                        problem: problem.to_string(),
                        fix: "set it to https://<region>.monitoring.azure.com, or unset it and set TAGWARDEN_METRICS_REGION".into(),
                    })?,
                    None => {
                        let region = var("TAGWARDEN_METRICS_REGION").or_else(|| var("REGION_NAME")).ok_or_else(|| ConfigError::Missing {
                            var: "TAGWARDEN_METRICS_REGION",
                            fix: "metrics go to https://<region>.monitoring.azure.com: set it to the Function App's region (e.g. westeurope), or set TAGWARDEN_METRICS_ENDPOINT, or unset TAGWARDEN_METRICS_RESOURCE_ID to turn metrics off".into(),
                        })?;
                        let region: String = region.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_ascii_lowercase();
                        http_url(&format!("https://{region}.monitoring.azure.com")).map_err(|problem| ConfigError::Invalid {
                            var: "TAGWARDEN_METRICS_REGION",
                            value: region.clone(),
                            problem: problem.to_string(),
                            fix: "set it to an Azure region name such as westeurope".into(),
                        })?
                    }
                };
                Some(MetricsConfig { endpoint, resource_id })
            }
        };
        let sweep_scopes = match var("TAGWARDEN_SWEEP_SCOPES") {
            Some(s) => {
                let scopes: Vec<String> = s
                    .split(',')
                    .map(|x| x.trim().trim_end_matches('/').to_string())
                    .filter(|x| !x.is_empty())
                    .collect();
                if let Err(why) = crate::resource_graph::Scopes::parse(&scopes) {
                    return Err(ConfigError::Invalid {
                        var: "TAGWARDEN_SWEEP_SCOPES",
                        value: s.clone(),
                        problem: why.to_string(),
                        fix: "a comma-separated list of /subscriptions/SUB, /subscriptions/SUB/resourceGroups/RG or /providers/Microsoft.Management/managementGroups/GROUP".into(),
                    });
                }
                scopes
            }
            // Default: the subscription the function itself lives in.
            None => metrics.as_ref().and_then(|m| subscription_of(&m.resource_id)).into_iter().collect(),
        };
        let resource_graph = match var("TAGWARDEN_RESOURCE_GRAPH").map(|v| v.to_ascii_lowercase()).as_deref() {
            None | Some("true") => true,
            Some("false") => false,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    var: "TAGWARDEN_RESOURCE_GRAPH",
                    value: other.to_string(),
                    problem: "is neither true nor false".into(),
                    fix: "unset it (sweeps list through Resource Graph), or set false to list through ARM only".into(),
                })
            }
        };
        let concurrency = tagwarden_engine::config::concurrency(var("TAGWARDEN_CONCURRENCY"), DEFAULT_CONCURRENCY)?;
        let event_topics = match var("TAGWARDEN_EVENT_TOPICS") {
            None => None,
            Some(s) => Some(
                s.split(',')
                    .map(|t| t.trim().trim_end_matches('/'))
                    .filter(|t| !t.is_empty())
                    .map(|t| match t.starts_with('/') && t.len() > 1 {
                        true => Ok(t.to_string()),
                        false => Err(ConfigError::Invalid {
                            var: "TAGWARDEN_EVENT_TOPICS",
                            value: t.to_string(),
                            problem: "is not an ARM resource ID".into(),
                            fix: "a comma-separated list of the ARM IDs Event Grid names as the events' topic: \
                                  /subscriptions/SUB for a subscription system topic, its resource group's or \
                                  storage account's ID for theirs"
                                .into(),
                        }),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let yield_to =
            tagwarden_engine::config::yield_to(var("TAGWARDEN_YIELD_TO"), tagwarden_core::cloud::Cloud::Azure)?;
        let mode = tagwarden_engine::config::mode(var("TAGWARDEN_MODE"))?;
        Ok(Config {
            yield_to,
            mode,
            port,
            policy,
            policy_ttl,
            clusters,
            http_timeout: Duration::from_secs(http_timeout),
            arm_endpoint,
            arm_audience,
            identity: IdentityConfig { endpoint, header, client_id },
            own,
            metrics,
            sweep_scopes,
            resource_graph,
            concurrency,
            event_topics,
        })
    }
}

fn http_url(s: &str) -> Result<Url, NotAnHttpUrl> {
    let url = Url::parse(s).map_err(NotAnHttpUrl::Unparsed)?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(NotAnHttpUrl::NoHttpHost);
    }
    Ok(url)
}

/// Why a setting is no http(s) URL with a host (`http_url`), as the end of its `ConfigError`.
#[derive(Debug, thiserror::Error)]
enum NotAnHttpUrl {
    #[error("is not a URL ({0})")]
    Unparsed(<Url as std::str::FromStr>::Err),
    #[error("is not an http(s) URL with a host")]
    NoHttpHost,
}

fn subscription_of(id: &str) -> Option<String> {
    let mut segs = id.split('/').skip(1);
    match (segs.next(), segs.next()) {
        (Some(s), Some(sub)) if s.eq_ignore_ascii_case("subscriptions") && !sub.is_empty() => {
            Some(format!("/subscriptions/{sub}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    const BASE: &[(&str, &str)] = &[
        ("TAGWARDEN_POLICY", "https://acct.blob.core.windows.net/policy/infrastructure.yaml"),
        ("IDENTITY_ENDPOINT", "http://127.0.0.1:41741/msi/token"),
        ("IDENTITY_HEADER", "secret"),
    ];

    #[test]
    fn defaults_and_derived_values() {
        let c = cfg(BASE).expect("config");
        assert_eq!(
            (c.port, c.policy_ttl, c.arm_endpoint.as_str()),
            (8080, Duration::from_secs(60), "https://management.azure.com/")
        );
        assert!(c.metrics.is_none() && c.own.is_empty() && c.sweep_scopes.is_empty());
        let app = "/subscriptions/sub-1/resourceGroups/rg/providers/Microsoft.Web/sites/fn";
        let mut v = BASE.to_vec();
        v.extend([
            ("TAGWARDEN_METRICS_RESOURCE_ID", app),
            ("TAGWARDEN_METRICS_REGION", "West Europe"),
            ("TAGWARDEN_SELF_PRINCIPAL_ID", "p-1"),
            ("TAGWARDEN_SELF_CLIENT_ID", "c-1"),
            ("FUNCTIONS_CUSTOMHANDLER_PORT", "40001"),
        ]);
        let c = cfg(&v).expect("config");
        let m = c.metrics.expect("metrics");
        assert_eq!(m.endpoint.as_str(), "https://westeurope.monitoring.azure.com/");
        assert_eq!(c.sweep_scopes, ["/subscriptions/sub-1"]);
        assert_eq!(c.own, ["p-1", "c-1"]);
        assert_eq!(c.identity.client_id.as_deref(), Some("c-1"));
        assert_eq!(c.port, 40001);
        assert_eq!(c.event_topics, None);
    }

    #[test]
    fn mode_is_enforce_unless_set_to_audit() {
        use tagwarden_core::mode::Mode;
        assert_eq!(cfg(BASE).expect("config").mode, Mode::Enforce);
        let mut v = BASE.to_vec();
        v.push(("TAGWARDEN_MODE", "audit"));
        assert_eq!(cfg(&v).expect("config").mode, Mode::Audit);
        let mut bad = BASE.to_vec();
        bad.push(("TAGWARDEN_MODE", "off"));
        let e = cfg(&bad).expect_err("off").to_string();
        assert!(e.starts_with("TAGWARDEN_MODE=\"off\" is not a mode") && e.contains("audit"), "{e}");
    }

    #[test]
    fn concurrency_is_8_unless_set_from_1_to_64() {
        assert_eq!(cfg(BASE).expect("config").concurrency, 8);
        let mut v = BASE.to_vec();
        v.push(("TAGWARDEN_CONCURRENCY", "32"));
        assert_eq!(cfg(&v).expect("config").concurrency, 32);
        for bad in ["0", "65", "many"] {
            let mut v = BASE.to_vec();
            v.push(("TAGWARDEN_CONCURRENCY", bad));
            let e = cfg(&v).expect_err(bad).to_string();
            assert!(e.contains("TAGWARDEN_CONCURRENCY") && e.contains("from 1 to 64") && e.contains("e.g. 8"), "{e}");
        }
    }

    #[test]
    fn event_topics_are_a_list_of_arm_ids() {
        let mut v = BASE.to_vec();
        v.push(("TAGWARDEN_EVENT_TOPICS", " /subscriptions/S1/ , /subscriptions/s2/resourceGroups/rg,"));
        let c = cfg(&v).expect("config");
        assert_eq!(c.event_topics.expect("set"), ["/subscriptions/S1", "/subscriptions/s2/resourceGroups/rg"]);
        let mut v = BASE.to_vec();
        v.push(("TAGWARDEN_EVENT_TOPICS", "/subscriptions/s,my-topic"));
        let e = cfg(&v).expect_err("not an id").to_string();
        assert!(
            e.contains("TAGWARDEN_EVENT_TOPICS") && e.contains("my-topic") && e.contains("/subscriptions/SUB"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_variable_and_the_fix() {
        let e = cfg(&BASE[1..]).expect_err("no policy").to_string();
        assert!(e.starts_with("TAGWARDEN_POLICY is not set"), "{e}");
        let mut v = BASE.to_vec();
        v[0] = ("TAGWARDEN_POLICY", "s3://bucket/key?sig=SECRET");
        let e = cfg(&v).expect_err("s3").to_string();
        assert!(e.contains("TAGWARDEN_POLICY") && e.contains("CONTAINER") && !e.contains("SECRET"), "{e}");
        let e = cfg(&BASE[..2]).expect_err("no header").to_string();
        assert!(e.contains("IDENTITY_HEADER"), "{e}");
        let mut v = BASE.to_vec();
        v.push(("POLICY_TTL", "1m"));
        assert!(cfg(&v).expect_err("ttl").to_string().contains("POLICY_TTL=\"1m\""));
        let mut v = BASE.to_vec();
        v.push((
            "TAGWARDEN_METRICS_RESOURCE_ID",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Web/sites/fn",
        ));
        assert!(cfg(&v).expect_err("region").to_string().contains("TAGWARDEN_METRICS_REGION"));
        let mut v = BASE.to_vec();
        v.push(("TAGWARDEN_SWEEP_SCOPES", "/subscriptions/s,/subscriptions/s/resourceGroups/rg/providers/X/y/z"));
        assert!(cfg(&v).expect_err("scope").to_string().contains("TAGWARDEN_SWEEP_SCOPES"));
        let mut v = BASE.to_vec();
        v[0] = ("TAGWARDEN_POLICY", "https://acct.blob.core.windows.net/policy/clusters/*/");
        assert!(cfg(&v).expect_err("set").to_string().starts_with("TAGWARDEN_CLUSTERS is not set"));
        v.push(("TAGWARDEN_CLUSTERS", "a-1"));
        assert_eq!(cfg(&v).expect("set").clusters, Some(vec!["a-1".to_string()]));
        let mut v = BASE.to_vec();
        v.push(("TAGWARDEN_ARM_ENDPOINT", "management.azure.com"));
        assert!(cfg(&v).expect_err("arm").to_string().contains("TAGWARDEN_ARM_ENDPOINT"));
    }
}
