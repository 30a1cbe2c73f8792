//! The publisher (`tagwarden publish --from-cluster --watch`) as kube-runtime controllers: the
//! cluster's source object (or a management cluster's set) is watched, each change reconciled
//! into a publish after a quiet moment (the controller's debounce), every object reconciled again
//! on a timer (the resync, which rewrites a published object changed or deleted at the store), and
//! a failed publish retried with [`Backoff::PUBLISH`] from the error policy.
//!
//! The policy store is behind [`Publish`], which the CLI implements with its S3, SSM and blob
//! targets: this crate sits below the cloud crates and never names them.
//!
//! - [`one`]: one cluster's Infrastructure object or ConfigMap, its status mirrored into the
//!   cluster as ClusterOperator-style conditions.
//! - [`set`]: each member of a HyperShift or Cluster API management cluster's set.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use futures_util::stream::{self, Stream};
use tagwarden_core::publish::{PublishError, PublishOutcome};
use tagwarden_core::status::StatusReport;
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};
use tagwarden_engine::retry::{Backoff, RetryAfter};

use crate::conditions::{Conditions, Facts, PublishFailure};
use crate::health::{Health, Reason};
use crate::mirror::StatusMirror;
use crate::source::{ClusterSource, SourceDocument};

pub mod one;
pub mod set;

/// A credential expiring within this is reported (Degraded) before it stops working. Azure caps a
/// user-delegation SAS at 7 days, so a 7-day warning would mark a freshly issued SAS Degraded from its
/// first minute: 48 hours leaves two days to rotate it.
pub const EXPIRY_WARNING: Duration = Duration::from_secs(48 * 3600);

/// How long a controller waits for a quiet moment after a change before it reconciles: changes
/// come in bursts (a start's initial listing, a controller writing one field after another).
pub const DEBOUNCE: Duration = Duration::from_millis(500);

/// Where the policy goes: the store the function reads.
pub trait Publish: Send + Sync + 'static {
    /// Where it publishes, without any credential.
    fn location(&self) -> String;

    /// The endpoint its calls go to, to name the proxy they go through.
    fn endpoint(&self) -> String;

    /// A credential that stops working at a known time: what it is, and when (ms since the epoch).
    fn credential_expiry(&self) -> Option<(String, u64)>;

    /// Publish `text`; into a cluster set, into the folder of `cluster` (which it must name).
    fn publish(
        &self,
        text: &str,
        cluster: Option<&str>,
        dry_run: bool,
    ) -> impl Future<Output = Result<PublishOutcome, PublishError>> + Send;

    /// The status reports the function wrote beside the policy: one, or one per cluster of a set
    /// (`(infraID, report)`, the report `None` where none was written yet).
    fn status(&self) -> impl Future<Output = Result<Reports, Unreadable>> + Send;
}

/// The function's status reports at a location: `(infraID, report)` for each cluster of a set, or
/// one `(None, report)`; the report is `None` where none was written yet.
pub type Reports = Vec<(Option<String>, Option<StatusReport>)>;

/// The function's status reports could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Unreadable {
    /// The whole chain of causes, on one line.
    pub message: String,
    /// The call got no answer at all (a proxy or the endpoint unreachable).
    pub got_no_answer: bool,
}

/// What the controllers tell the person or the log reading the publisher's standard streams.
pub trait Sink: Send + Sync + 'static {
    /// A publish decided (written, unchanged, refused, or would-write on a dry run).
    fn published(&self, outcome: &PublishOutcome);
    /// A member of a set whose object gives no document to publish.
    fn not_published(&self, object: &str, why: &str);
}

/// What every publisher is told by its flags.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The quiet moment after a change (the controller's debounce).
    pub debounce: Duration,
    /// Every object is reconciled again this often.
    pub resync: Duration,
    /// The status report is mirrored this often.
    pub status_interval: Duration,
    /// Validate and show; write nothing.
    pub dry_run: bool,
    /// `POD_NAME`, the Events' `reportingInstance`.
    pub instance: Option<String>,
}

/// `--cluster` named another cluster than the Infrastructure object's own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--cluster {flag} contradicts the cluster's Infrastructure object, whose status.infrastructureName is {own}: drop --cluster, or run this publisher in cluster {flag}")]
pub struct ClusterContradiction {
    pub flag: String,
    pub own: String,
}

/// The cluster a set's folder is for, with --from-cluster: the Infrastructure object's own
/// status.infrastructureName (the cluster says who it is; `--cluster`, if given, must agree), or
/// for a ConfigMap source, `--cluster` alone (a ConfigMap is anyone's to edit in its namespace).
pub fn proven_cluster(
    flag: Option<&str>,
    source: &ClusterSource,
    doc: &SourceDocument,
) -> Result<Option<String>, ClusterContradiction> {
    let ClusterSource::Infrastructure = source else { return Ok(flag.map(str::to_string)) };
    let own = tagwarden_core::policy::load::declared_infra_id(&doc.name, &doc.text).ok().flatten();
    match (own, flag) {
        (Some(own), Some(flag)) if own != flag => Err(ClusterContradiction { flag: flag.to_string(), own }),
        (own, flag) => Ok(own.or_else(|| flag.map(str::to_string))),
    }
}

/// Why a publish failed, for the metric (`tagwarden_publish_failures_total{reason}`) and the
/// `Degraded` condition: the store's error class decides, and a call that got no answer names
/// the proxy it went through, if any.
pub fn classify(e: &PublishError, endpoint: &str) -> (Reason, PublishFailure) {
    let failure = |metric, reason, message: String| (metric, PublishFailure { reason, message });
    let cloud = match e {
        PublishError::Conflict { .. } | PublishError::Raced { .. } => {
            return failure(Reason::Conflict, "Conflict", e.to_string());
        }
        PublishError::Cloud(inner) => inner.downcast_ref::<CloudError>(),
    };
    let Some(cloud) = cloud else { return failure(Reason::Failed, "PublishFailed", e.to_string()) };
    let text = cloud.to_string();
    // No answer at all comes first: an unreachable STS or Entra endpoint (through a proxy that is
    // down) is no credential problem, whatever the SDK's credential chain says around it.
    if cloud.got_no_answer() {
        return failure(Reason::Unreachable, "Unreachable", through_proxy(text, endpoint));
    }
    // Credentials: Azure's token endpoints (operation identity:Token), and the AWS SDK's
    // credential chain, whose failures arrive as the error's code or message (`ExpiredToken…`,
    // "failed to load credentials", web identity errors) — never the target, which names a bucket.
    let said = format!("{} {}", cloud.code, cloud.message).to_ascii_lowercase();
    let credentials = cloud.operation.starts_with("identity:")
        || cloud.code.contains("ExpiredToken")
        || cloud.code.contains("InvalidIdentityToken")
        || said.contains("credential")
        || said.contains("web identity");
    if credentials {
        let fix = match cloud.cloud {
            tagwarden_core::cloud::Cloud::Aws => {
                "; the publisher takes the AWS SDK's standard chain: on OpenShift, mount the CredentialsRequest's Secret and point AWS_SHARED_CREDENTIALS_FILE at its `credentials` key (static keys in mint mode; role_arn + web_identity_token_file in STS mode, from ccoctl), elsewhere AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE (IRSA)"
            }
            tagwarden_core::cloud::Cloud::Azure => "",
            // OpenShift on Google Cloud: the Cloud Credential Operator's Secret holds a service
            // account key or a Workload Identity Federation configuration, read from the file
            // GOOGLE_APPLICATION_CREDENTIALS names (Application Default Credentials).
            tagwarden_core::cloud::Cloud::Gcp => {
                "; the publisher takes Application Default Credentials: mount the CredentialsRequest's Secret and point GOOGLE_APPLICATION_CREDENTIALS at its `service_account.json` key"
            }
        };
        return failure(Reason::Credentials, "CredentialsRejected", format!("{text}{fix}"));
    }
    match cloud.class {
        ErrorClass::Denied => failure(Reason::Denied, "AccessDenied", text),
        ErrorClass::Fatal if cloud.code.contains("AccessDenied") || cloud.code.contains("Forbidden") => {
            failure(Reason::Denied, "AccessDenied", text)
        }
        _ => failure(Reason::Failed, "PublishFailed", text),
    }
}

/// `message` about a call to `endpoint` that got no answer, naming the proxy it went through, if any.
pub fn through_proxy(message: String, endpoint: &str) -> String {
    match tagwarden_engine::network::proxy_for(endpoint) {
        Some(proxy) => format!(
            "{message} (through the proxy {proxy}: check that it is up and lets the connection through, or add the host to NO_PROXY)"
        ),
        None => message,
    }
}

/// Connect to the policy location, and until that works (a missing credential Secret, a bad CA
/// bundle), say why in the cluster and try again with back-off rather than crash-loop: the
/// Secret may be created after the pod. `location` is the location as given, without its query.
pub async fn connect<P, E, F, Fut>(
    location: &str,
    mirror: &StatusMirror,
    health: &Health,
    mut attempt: F,
) -> Result<P, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<P, E>>,
    E: RetryAfter + fmt::Display,
{
    let attempt = |_| {
        let connected = attempt();
        async move {
            let e = match connected.await {
                Ok(target) => return Ok(target),
                Err(e) => e,
            };
            let message = format!("{e:#}");
            let lower = message.to_ascii_lowercase();
            let (metric, reason) =
                if lower.contains("credential") || lower.contains("workload identity") || lower.contains("sas") {
                    (Reason::Credentials, "CredentialsRejected")
                } else {
                    (Reason::Failed, "SetupFailed")
                };
            health.failed(metric);
            health.set_ready();
            tracing::error!(error = %message, "cannot reach the policy location; retrying");
            let facts = Facts {
                location: location.to_string(),
                failure: Some(PublishFailure { reason, message }),
                ..Facts::default()
            };
            if let Err(e) = mirror.mirror_with(None, Conditions::from_facts(&facts, None, &now_rfc3339())).await {
                tracing::warn!(error = %e, "status mirror failed");
            }
            Err(e)
        }
    };
    Backoff::PUBLISH.retry(|_| true, attempt).await
}

/// A credential of `target` that expires within [`EXPIRY_WARNING`], said before it happens.
pub fn expiring(target: &impl Publish) -> Option<String> {
    let (what, at_ms) = target.credential_expiry()?;
    crate::conditions::expiry_warning(&what, at_ms, unix_ms(), EXPIRY_WARNING)
}

/// Mirror the function's status report (the one of `own_cluster` in a set, when there is one)
/// with the publisher's conditions from `facts`.
pub async fn mirror_now(mirror: &StatusMirror, target: &impl Publish, own_cluster: Option<&str>, facts: &Facts) {
    use tagwarden_core::policy::cache::PolicyState;
    let mut facts = facts.clone();
    facts.expiring = expiring(target);
    let report = match target.status().await {
        Ok(reports) => {
            reports.into_iter().find(|(c, _)| c.is_none() || c.as_deref() == own_cluster).and_then(|(_, r)| r)
        }
        Err(e) => {
            tracing::warn!(error = %e, "status report unreadable");
            let why = e.message.clone();
            let endpoint = target.endpoint();
            facts.report_unreadable = Some(if e.got_no_answer { through_proxy(why, &endpoint) } else { why });
            None
        }
    };
    let conditions = Conditions::from_facts(&facts, report.as_ref(), &now_rfc3339());
    // The mirrored report shows the publisher's own refusal on top: the cluster's latest
    // document was rejected, so the last good one stays in force.
    let report = report.map(|mut report| {
        if !facts.refused.is_empty() {
            report.policy.state = PolicyState::RejectedKeepingLastGood;
            report.policy.errors = facts.refused.clone();
        }
        report
    });
    if let Err(e) = mirror.mirror_with(report.as_ref(), conditions).await {
        tracing::warn!(error = %e, "status mirror failed");
    }
}

pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default()
}

fn unix_ms() -> u64 {
    (unix_now() * 1000.0) as u64
}

fn now_rfc3339() -> String {
    tagwarden_core::events::format_rfc3339_ms(unix_ms())
}

/// A unit every `period`, the first one `period` from now; a tick missed (the runtime busy) is
/// not caught up on.
pub(crate) fn every(period: Duration) -> impl Stream<Item = ()> + Send {
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    stream::unfold(interval, |mut interval| async move {
        interval.tick().await;
        Some(((), interval))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::expiry_warning;

    const NOW_MS: u64 = 1_800_000_000_000;
    const HOUR_MS: u64 = 3600 * 1000;

    #[test]
    fn a_fresh_seven_day_sas_is_not_expiring() {
        let at = NOW_MS + 7 * 24 * HOUR_MS - 60 * 1000;
        assert_eq!(expiry_warning("SAS", at, NOW_MS, EXPIRY_WARNING), None);
    }

    #[test]
    fn a_sas_expiring_in_47_hours_warns() {
        let at = NOW_MS + 47 * HOUR_MS;
        let warning = expiry_warning("SAS", at, NOW_MS, EXPIRY_WARNING).expect("a warning");
        assert!(warning.contains("in 47 h"), "{warning}");
    }

    #[test]
    fn the_infrastructure_object_names_the_cluster_and_a_contradicting_flag_is_refused() {
        let doc = SourceDocument {
            name: ClusterSource::Infrastructure.to_string(),
            text: "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata:\n  name: cluster\nstatus:\n  infrastructureName: c-1\n  platformStatus:\n    type: AWS\n    aws:\n      region: us-east-1\n".into(),
            resource_version: "1".into(),
        };
        let infra = ClusterSource::Infrastructure;
        assert_eq!(proven_cluster(None, &infra, &doc), Ok(Some("c-1".into())));
        assert_eq!(proven_cluster(Some("c-1"), &infra, &doc), Ok(Some("c-1".into())));
        let e = proven_cluster(Some("c-2"), &infra, &doc).expect_err("contradicts");
        assert!(e.to_string().starts_with("--cluster c-2 contradicts"), "{e}");
        let cm = ClusterSource::ConfigMap { namespace: "ns".into(), name: "p".into() };
        assert_eq!(proven_cluster(Some("c-2"), &cm, &doc), Ok(Some("c-2".into())));
    }
}
