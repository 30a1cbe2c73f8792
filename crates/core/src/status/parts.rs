//! The parts a sweep runs in (an Azure subscription, an AWS member account's region) and which
//! resources fall in each.

/// The part of an AWS organization one sweep shard covers: a member account's region, and with
/// `global` the resources whose ARNs name no region (IAM, Route 53), which one region's shard
/// sweeps (IAM's and Route 53's events come from us-east-1 only). A listing that failed is named
/// `<what> in <account>/<region>` by the shard's adapter, so it too falls in its part. An S3
/// bucket's ARN names no region either, but the bucket has one, and each region's shard lists its
/// own (`ResourceFailure::region`).
pub fn aws_region_part(account: &str, region: &str, global: bool) -> String {
    format!("{AWS_PART}{account}/{region}{}", if global { GLOBAL } else { "" })
}

const AWS_PART: &str = "aws:";
const GLOBAL: &str = "+global";

/// An AWS part's account, region and whether it holds what has no region.
pub(super) fn aws_part(part: &str) -> Option<(&str, &str, bool)> {
    let scope = part.strip_prefix(AWS_PART)?;
    let (scope, global) = scope.strip_suffix(GLOBAL).map_or((scope, false), |s| (s, true));
    let (account, region) = scope.split_once('/').unwrap_or((scope, ""));
    Some((account, region, global))
}

/// An S3 bucket's ARN (`arn:<partition>:s3:::<name>`): it names neither region nor account
/// (Service Authorization Reference, Amazon S3, resource type `bucket`), though the bucket lives
/// in one region. `GetResources` "Returns all the tagged or previously tagged resources that are
/// located in the specified AWS Region for the account" (Resource Groups Tagging API reference),
/// so a shard lists its own region's buckets only (that this holds for buckets is inferred: the
/// reference names no service).
pub(super) fn is_bucket_arn(resource: &str) -> bool {
    let arn: Vec<&str> = resource.splitn(6, ':').collect();
    matches!(arn.as_slice(), ["arn", _, "s3", "", "", name] if !name.contains('/'))
}

/// Whether `resource` (an ARM ID) lies within `part` (an ID prefix such as `/subscriptions/<id>`):
/// ARM IDs compare without case. An AWS shard's part ([`aws_region_part`]) holds the ARNs of its
/// account and region, and its failed listings.
pub fn in_part(resource: &str, part: &str) -> bool {
    if let Some((account, region, global)) = aws_part(part) {
        let arn: Vec<&str> = resource.splitn(6, ':').collect();
        return match arn.as_slice() {
            ["arn", _, _, r, a, _] => (*r == region || (global && r.is_empty())) && (*a == account || a.is_empty()),
            _ => resource.ends_with(&format!(" in {account}/{region}")),
        };
    }
    let part = part.trim_end_matches('/');
    resource.len() >= part.len()
        && resource.is_char_boundary(part.len())
        && resource[..part.len()].eq_ignore_ascii_case(part)
        && matches!(resource.as_bytes().get(part.len()), None | Some(b'/'))
}
