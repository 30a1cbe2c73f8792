//! Who else writes a contested key, and the documented way to end that fight for that kind of
//! writer: the audit report names both beside each contested key (`crate::contest`).
//!
//! A contest records the writer as the event named it ([`crate::contest::Contest::writer`]):
//! on AWS CloudTrail's `userIdentity.arn` (for a controller, its role session:
//! `arn:aws:sts::<account>:assumed-role/<role>/<session>`), on Azure the caller's UPN, `appid`
//! claim or principal id. [`WriterKind::of`] classifies that string by the names the tools'
//! documented roles and sessions carry. **How each writer's role or session is recognised is
//! partly inferred**: the tools document their roles' default names (below, per kind), not that
//! every installation keeps them; a renamed role, or an Azure service principal named only by
//! its application id (a GUID, different in every tenant), is [`WriterKind::Unknown`], whose
//! remedy is the general one. Each kind's remedy cites the documentation it comes from.
//!
//! Pure: no I/O; the CLI's report shows it.

use serde::{Deserialize, Serialize};

use crate::cloud::Cloud;

/// The kind of writer a contested key is fought over with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriterKind {
    /// Terraform (or a run of it in HCP Terraform / Terraform Cloud) applying a configuration
    /// that sets or drops the key.
    Terraform,
    /// The AWS Load Balancer Controller, which "owns all the tags of the managed AWS resources".
    AwsLoadBalancerController,
    /// Cluster API's AWS provider (CAPA), which removes additional tags it applied before.
    Capa,
    /// Cluster API's Azure provider (CAPZ), likewise.
    Capz,
    /// HyperShift's control plane on AWS (the control-plane operator, and the CAPA it runs for a
    /// hosted cluster's node pools: ROSA HCP's operator roles), which applies the hosted cluster's
    /// `resourceTags`.
    HyperShift,
    /// Azure Policy's `modify` effect (an assignment's remediation, or the effect applied to a
    /// request).
    AzurePolicy,
    /// None of the above, or a writer named only by an ID.
    Unknown,
}

/// The documented way to end a fight with a kind of writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remedy {
    /// What to do, naming the setting.
    pub how: String,
    /// The documentation it comes from (its title and the field or argument).
    pub source: String,
}

/// A contested key's other writer, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Writer {
    /// The principal as the contest state recorded it ([`crate::contest::UNKNOWN_WRITER`] when no
    /// event named one).
    pub principal: String,
    pub kind: WriterKind,
    pub remedy: Remedy,
}

impl Writer {
    /// The writer `principal` of a key contested on a resource of `cloud` (Terraform's remedy
    /// differs by cloud: an ARN is AWS whatever the report says).
    pub fn of(principal: &str, key: &str, cloud: Cloud) -> Writer {
        let kind = WriterKind::of(principal);
        let cloud = if principal.starts_with("arn:") { Cloud::Aws } else { cloud };
        let mut remedy = kind.remedy(key, cloud);
        if kind == WriterKind::Unknown && cloud == Cloud::Azure && is_guid(principal) {
            // An Azure event names a service principal by its application (client) id alone, the
            // same for no two tenants; which tool it is, the deployment knows (its TAGWARDEN_YIELD_TO).
            remedy.how.push_str(&format!(
                "; an application (client) id: if it is CAPZ's (the id TAGWARDEN_YIELD_TO names on Azure), put {key} in AzureCluster.spec.additionalTags; if it is an Azure Policy assignment's identity, change its modify effect or exempt the scope"
            ));
        }
        Writer { principal: principal.to_string(), kind, remedy }
    }
}

/// Whether `text` is a GUID (`8-4-4-4-12` hexadecimal digits), as Azure names an application or
/// principal.
fn is_guid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Whether the lowercased `text` holds any of `words`.
fn holds(text: &str, words: &[&str]) -> bool {
    words.iter().any(|w| text.contains(w))
}

impl WriterKind {
    /// Classify a writer by its principal (an ARN, a UPN, an application or principal id).
    /// The names come from each tool's documented defaults (inferred to hold: see the module):
    ///
    /// - HyperShift: its operator roles (`…-control-plane-operator`, and ROSA HCP's
    ///   `…-kube-system-capa-controller-manager`, the CAPA HyperShift runs for node pools; ROSA
    ///   documentation, "ROSA with HCP operator IAM roles"), or `hypershift` in the role. Checked
    ///   before CAPA, whose name the latter contains.
    /// - CAPA: `controllers.cluster-api-provider-aws.sigs.k8s.io`, the role `clusterawsadm`
    ///   creates (CAPA book, "Using clusterawsadm to fulfill prerequisites"), or `capa-controller`.
    /// - CAPZ: `cluster-api-provider-azure` or `capz` in the identity's UPN or name.
    /// - AWS Load Balancer Controller: `aws-load-balancer-controller` (the IAM role its
    ///   installation guide names, `AmazonEKSLoadBalancerControllerRole`, as well).
    /// - Terraform: `terraform` in the role or session (HCP Terraform's dynamic credentials name
    ///   their session after the run; a role named for its pipeline is the common practice).
    /// - Azure Policy: `policyassignments`, `policyinsights` or `azure policy` in the caller.
    pub fn of(principal: &str) -> WriterKind {
        let p = principal.to_ascii_lowercase();
        if holds(&p, &["hypershift", "control-plane-operator", "kube-system-capa-controller-manager"]) {
            WriterKind::HyperShift
        } else if holds(&p, &["cluster-api-provider-aws", "capa-controller", "capa-manager"]) {
            WriterKind::Capa
        } else if holds(&p, &["cluster-api-provider-azure", "capz"]) {
            WriterKind::Capz
        } else if holds(&p, &["aws-load-balancer-controller", "loadbalancercontroller"]) {
            WriterKind::AwsLoadBalancerController
        } else if p.contains("terraform") {
            WriterKind::Terraform
        } else if holds(&p, &["policyassignments", "policyinsights", "azure policy", "azurepolicy"]) {
            WriterKind::AzurePolicy
        } else {
            WriterKind::Unknown
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WriterKind::Terraform => "terraform",
            WriterKind::AwsLoadBalancerController => "aws-load-balancer-controller",
            WriterKind::Capa => "capa",
            WriterKind::Capz => "capz",
            WriterKind::HyperShift => "hypershift",
            WriterKind::AzurePolicy => "azure-policy",
            WriterKind::Unknown => "unknown",
        }
    }

    /// How to end the fight over `key` with this kind of writer on `cloud`: make the writer leave
    /// the key alone, or give it the policy's value so both agree.
    pub fn remedy(self, key: &str, cloud: Cloud) -> Remedy {
        let r = |how: String, source: &str| Remedy { how, source: source.to_string() };
        match (self, cloud) {
            (WriterKind::Terraform, Cloud::Aws) => r(
                format!("Terraform: add the key to the AWS provider's ignore_tags (provider \"aws\" {{ ignore_tags {{ keys = [\"{key}\"] }} }}, or key_prefixes), so its plans neither remove nor report it"),
                "Terraform AWS provider documentation: provider argument ignore_tags (Resource Tagging guide)",
            ),
            (WriterKind::Terraform, Cloud::Azure) => r(
                format!("Terraform: the azurerm provider has no provider-level ignore_tags; add lifecycle {{ ignore_changes = [tags[\"{key}\"]] }} (or [tags]) to the resource"),
                "Terraform language documentation: the lifecycle meta-argument, ignore_changes",
            ),
            (WriterKind::Terraform, Cloud::Gcp) => r(
                format!("Terraform: the google provider's labels argument manages only the labels in its configuration; put {key} with the policy's value in the provider's default_labels, or add lifecycle {{ ignore_changes = [labels[\"{key}\"]] }} to the resource"),
                "Terraform google provider documentation: provider argument default_labels; the lifecycle meta-argument, ignore_changes",
            ),
            (WriterKind::AwsLoadBalancerController, _) => r(
                format!("AWS Load Balancer Controller: give {key} the policy's value in the controller's --default-tags flag (Helm value defaultTags), or in the Ingress annotation alb.ingress.kubernetes.io/tags / the Service annotation service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"),
                "AWS Load Balancer Controller documentation: controller configuration (--default-tags), Ingress annotations (alb.ingress.kubernetes.io/tags), Service annotations (service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags)",
            ),
            (WriterKind::Capa, _) => r(
                format!("CAPA: put {key} with the policy's value in AWSCluster.spec.additionalTags (and AWSMachineTemplate.spec.template.spec.additionalTags for machines)"),
                "Cluster API Provider AWS: AWSCluster CRD field spec.additionalTags",
            ),
            (WriterKind::Capz, _) => r(
                format!("CAPZ: put {key} with the policy's value in AzureCluster.spec.additionalTags (and AzureMachineTemplate.spec.template.spec.additionalTags for machines)"),
                "Cluster API Provider Azure: AzureCluster CRD field spec.additionalTags",
            ),
            (WriterKind::HyperShift, _) => r(
                format!("HyperShift: put {key} with the policy's value in HostedCluster.spec.platform.aws.resourceTags"),
                "HyperShift API reference: HostedCluster AWSPlatformSpec field resourceTags",
            ),
            (WriterKind::AzurePolicy, _) => r(
                format!("Azure Policy: make the assignment's modify effect write {key} with the policy's value (or not at all), or exempt the cluster's scope from the assignment with a policy exemption"),
                "Azure Policy documentation: the modify effect; Azure Policy exemption structure",
            ),
            (WriterKind::Unknown, _) => r(
                format!("unknown writer: exclude {key} with auditKeys in the policy (reported, never written), or yield to it via TAGWARDEN_YIELD_TO; or find the writer and configure it to leave the key alone"),
                "tagwarden README: Never fighting another controller (TAGWARDEN_YIELD_TO, auditKeys)",
            ),
        }
    }
}

impl std::fmt::Display for WriterKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Principals in the shapes the events name them: CloudTrail's assumed-role session ARN
    /// (`arn:aws:sts::<account>:assumed-role/<role>/<session>`), Azure's UPN or application id.
    #[test]
    fn writers_are_classified_by_their_role_or_session() {
        let cases = [
            ("arn:aws:sts::123456789012:assumed-role/terraform-ci/1700000000123456789", WriterKind::Terraform),
            ("arn:aws:sts::123456789012:assumed-role/deploy/terraform-run-abc123XYZ", WriterKind::Terraform),
            ("arn:aws:iam::123456789012:user/Terraform", WriterKind::Terraform),
            ("terraform@contoso.onmicrosoft.com", WriterKind::Terraform),
            (
                "arn:aws:sts::123456789012:assumed-role/eks-prod-aws-load-balancer-controller/1699999999000000000",
                WriterKind::AwsLoadBalancerController,
            ),
            (
                "arn:aws:sts::123456789012:assumed-role/AmazonEKSLoadBalancerControllerRole/1699999999000000000",
                WriterKind::AwsLoadBalancerController,
            ),
            (
                "arn:aws:sts::123456789012:assumed-role/controllers.cluster-api-provider-aws.sigs.k8s.io/1699999999",
                WriterKind::Capa,
            ),
            ("arn:aws:sts::123456789012:assumed-role/mgmt-capa-controller/capa-session", WriterKind::Capa),
            (
                "arn:aws-us-gov:sts::123456789012:assumed-role/rosa-hcp-kube-system-capa-controller-manager/1700000000",
                WriterKind::HyperShift,
            ),
            (
                "arn:aws:sts::123456789012:assumed-role/hc1-kube-system-control-plane-operator/1700000000",
                WriterKind::HyperShift,
            ),
            ("capz-manager@contoso.onmicrosoft.com", WriterKind::Capz),
            ("cluster-api-provider-azure-sp", WriterKind::Capz),
            ("Azure Policy", WriterKind::AzurePolicy),
            (
                "/providers/Microsoft.Management/managementGroups/mg/providers/Microsoft.Authorization/policyAssignments/tags",
                WriterKind::AzurePolicy,
            ),
            ("arn:aws:sts::123456789012:assumed-role/Admin/alice@example.com", WriterKind::Unknown),
            ("3f2c1d0e-1111-2222-3333-444455556666", WriterKind::Unknown),
            (crate::contest::UNKNOWN_WRITER, WriterKind::Unknown),
        ];
        for (principal, kind) in cases {
            assert_eq!(WriterKind::of(principal), kind, "{principal}");
        }
    }

    #[test]
    fn each_kind_has_its_documented_remedy_and_names_the_key() {
        let how = |p: &str, cloud| Writer::of(p, "team", cloud).remedy.how;
        let tf_aws = how("arn:aws:sts::123456789012:assumed-role/terraform/s", Cloud::Azure);
        assert!(tf_aws.contains("ignore_tags") && tf_aws.contains("\"team\""), "an ARN is AWS: {tf_aws}");
        let tf_azure = how("terraform@contoso.com", Cloud::Azure);
        assert!(tf_azure.contains("ignore_changes = [tags[\"team\"]]") && !tf_azure.contains("keys ="), "{tf_azure}");
        let lbc = how("arn:aws:sts::1:assumed-role/aws-load-balancer-controller/s", Cloud::Aws);
        for word in [
            "--default-tags",
            "defaultTags",
            "alb.ingress.kubernetes.io/tags",
            "service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags",
        ] {
            assert!(lbc.contains(word), "{word}: {lbc}");
        }
        assert!(WriterKind::Capa.remedy("k", Cloud::Aws).how.contains("AWSCluster.spec.additionalTags"));
        assert!(WriterKind::Capz.remedy("k", Cloud::Azure).how.contains("AzureCluster.spec.additionalTags"));
        assert!(WriterKind::HyperShift
            .remedy("k", Cloud::Aws)
            .how
            .contains("HostedCluster.spec.platform.aws.resourceTags"));
        let policy = WriterKind::AzurePolicy.remedy("k", Cloud::Azure).how;
        assert!(policy.contains("modify") && policy.contains("exemption"), "{policy}");
        let unknown = WriterKind::Unknown.remedy("k", Cloud::Aws).how;
        assert!(
            unknown.starts_with("unknown writer")
                && unknown.contains("auditKeys")
                && unknown.contains("TAGWARDEN_YIELD_TO")
        );
        for kind in [
            WriterKind::Terraform,
            WriterKind::AwsLoadBalancerController,
            WriterKind::Capa,
            WriterKind::Capz,
            WriterKind::HyperShift,
            WriterKind::AzurePolicy,
            WriterKind::Unknown,
        ] {
            assert!(!kind.remedy("k", Cloud::Aws).source.is_empty(), "{kind} cites its source");
        }
        // An Azure application id names no tool: the remedy says what it is if it is CAPZ's.
        let app = Writer::of("3f2c1d0e-1111-2222-3333-444455556666", "team", Cloud::Azure);
        assert_eq!(app.kind, WriterKind::Unknown);
        assert!(app.remedy.how.contains("CAPZ's") && app.remedy.how.contains("AzureCluster.spec.additionalTags"));
        assert!(!Writer::of("alice@contoso.com", "team", Cloud::Azure).remedy.how.contains("CAPZ"));
        let w = serde_json::to_value(Writer::of("capz-sp", "k", Cloud::Azure)).expect("json");
        assert_eq!(w["kind"], "capz");
    }
}
