//! Reading and writing one resource's tags through each service's own API (DESIGN.md §4):
//! EC2 `DescribeTags`/`CreateTags`, S3 `GetBucketTagging` + read-merge-`PutBucketTagging`,
//! ELBv2 `DescribeTags`/`AddTags` (one ARN per call: the service refuses more), IAM
//! `GetRole`/`GetUser`/`List*Tags` and `Tag*`. Nothing here deletes a tag.
//!
//! A resource may not be visible yet right after its creation event: reads retry `NotFound`
//! with bounded exponential backoff, then give up with a retryable error so the event goes back
//! to the queue (and finally to the dead-letter queue) instead of being dropped.
//!
//! Deliberately not here: deciding what to write (`crate::plan`), ownership (`crate::cloud`), and
//! which kind goes through which API and batch (`super::kinds`).

use aws_sdk_ec2::error::ProvideErrorMetadata;

use super::kinds::{api_of, arn_name, Api};
use super::Clients;
use crate::cloud_error::{Backoff, CloudError, ErrorClass};
use crate::rate_limit::RateLimit;
use crate::resource::ResourceRef;
use crate::TagMap;

/// One page of an IAM `List*Tags` answer: its tags, and the marker of the next page if any.
type IamPage = (Vec<aws_sdk_iam::types::Tag>, Option<String>);

/// Every page of an IAM `List*Tags` call into `tags`; `page` sends the request for a marker.
async fn read_iam_pages<F, Fut>(tags: &mut TagMap, mut page: F) -> Result<(), CloudError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<IamPage, CloudError>>,
{
    let mut marker = None;
    loop {
        let (page_tags, next) = page(marker).await?;
        tags.extend(page_tags.iter().map(|t| (t.key().to_string(), t.value().to_string())));
        marker = next;
        if marker.is_none() {
            return Ok(());
        }
    }
}

/// Tag reads and writes for every resource type the event parser emits.
#[derive(Debug, Clone)]
pub struct Tagger {
    pub clients: Clients,
    pub not_found: Backoff,
    /// EC2 ids per `CreateTags` in a sweep (the API takes up to 1000).
    pub ec2_batch: usize,
    /// Paces every EC2 `CreateTags` (the account's bucket is the cluster's too; `crate::rate_limit`).
    pub ec2_writes: Option<RateLimit>,
}

impl Tagger {
    pub fn new(clients: Clients) -> Self {
        Tagger { clients, not_found: Backoff::default(), ec2_batch: 1000, ec2_writes: None }
    }

    /// The resource's current tags, waiting out eventual consistency.
    pub async fn read(&self, r: &ResourceRef) -> Result<TagMap, CloudError> {
        self.read_full(r).await.map(|(tags, _)| tags)
    }

    /// The current tags and, where the read says it (IAM roles and users), the resource's real
    /// ARN: IAM `Tag*` events name a role or user without its path, and overrides match the ARN.
    pub async fn read_full(&self, r: &ResourceRef) -> Result<(TagMap, Option<String>), CloudError> {
        let mut attempt = 0;
        loop {
            match self.read_once(r).await {
                Err(e) if e.class == ErrorClass::NotFound && attempt + 1 < self.not_found.attempts => {
                    tokio::time::sleep(self.not_found.delay(attempt)).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// One read, without waiting for a resource not visible yet.
    pub async fn read_once(&self, r: &ResourceRef) -> Result<(TagMap, Option<String>), CloudError> {
        let c = &self.clients;
        let id = r.id.as_str();
        let mut tags = TagMap::new();
        match api_of(r) {
            Api::Ec2 => {
                let mut token = None;
                loop {
                    let out = c
                        .ec2
                        .describe_tags()
                        .filters(aws_sdk_ec2::types::Filter::builder().name("resource-id").values(id).build())
                        .max_results(1000)
                        .set_next_token(token)
                        .send()
                        .await
                        .map_err(|e| CloudError::from_sdk("ec2:DescribeTags", id, e))?;
                    for t in out.tags() {
                        tags.insert(t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string());
                    }
                    token = out.next_token().filter(|t| !t.is_empty()).map(str::to_owned);
                    if token.is_none() {
                        break;
                    }
                }
                // DescribeTags answers an empty list for an id that does not exist; ask once more
                // where eventual consistency matters (nothing found at all, not even ownership).
                if tags.is_empty() {
                    self.ec2_exists(r).await?;
                }
            }
            Api::S3 => match c.s3.get_bucket_tagging().bucket(id).send().await {
                Ok(out) => tags.extend(out.tag_set().iter().map(|t| (t.key().to_string(), t.value().to_string()))),
                Err(e) if e.code() == Some("NoSuchTagSet") => {}
                Err(e) => return Err(CloudError::from_sdk("s3:GetBucketTagging", id, e)),
            },
            Api::Elbv2 => {
                let out = c
                    .elbv2
                    .describe_tags()
                    .resource_arns(id)
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("elasticloadbalancing:DescribeTags", id, e))?;
                for d in out.tag_descriptions() {
                    tags.extend(
                        d.tags().iter().map(|t| {
                            (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string())
                        }),
                    );
                }
            }
            Api::ElbClassic => {
                let name = arn_name(id);
                let out = c
                    .elb
                    .describe_tags()
                    .load_balancer_names(name)
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("elasticloadbalancing:DescribeTags", id, e))?;
                for d in out.tag_descriptions() {
                    tags.extend(
                        d.tags().iter().map(|t| (t.key().to_string(), t.value().unwrap_or_default().to_string())),
                    );
                }
            }
            Api::Route53 => {
                let (rtype, zone) = route53_target(r);
                let out = c
                    .route53
                    .list_tags_for_resource()
                    .resource_type(rtype)
                    .resource_id(zone)
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("route53:ListTagsForResource", id, e))?;
                if let Some(set) = out.resource_tag_set() {
                    tags.extend(
                        set.tags().iter().map(|t| {
                            (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string())
                        }),
                    );
                }
            }
            // GetResources answers only for resources that carry (or once carried) tags: an
            // absent ARN reads as untagged, hence not owned.
            Api::Tagging => {
                let out = c
                    .tagging
                    .get_resources()
                    .resource_arn_list(r.arn.as_deref().unwrap_or(id))
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("tag:GetResources", id, e))?;
                for m in out.resource_tag_mapping_list() {
                    tags.extend(m.tags().iter().map(|t| (t.key().to_string(), t.value().to_string())));
                }
            }
            // GetRole / GetUser carry every tag (at most 50) and the ARN with its path, in one call.
            Api::IamRole => {
                let out = c.iam.get_role().role_name(id).send().await;
                let out = out.map_err(|e| CloudError::from_sdk("iam:GetRole", id, e))?;
                let role = out.role();
                tags.extend(role.and_then(|r| r.tags.as_deref()).unwrap_or_default().iter().map(iam_pair));
                return Ok((tags, role.map(|r| r.arn().to_string())));
            }
            Api::IamUser => {
                let out = c.iam.get_user().user_name(id).send().await;
                let out = out.map_err(|e| CloudError::from_sdk("iam:GetUser", id, e))?;
                let user = out.user();
                tags.extend(user.and_then(|u| u.tags.as_deref()).unwrap_or_default().iter().map(iam_pair));
                return Ok((tags, user.map(|u| u.arn().to_string())));
            }
            Api::IamInstanceProfile => {
                read_iam_pages(&mut tags, |marker| async move {
                    let out =
                        c.iam.list_instance_profile_tags().instance_profile_name(id).set_marker(marker).send().await;
                    let out = out.map_err(|e| CloudError::from_sdk("iam:ListInstanceProfileTags", id, e))?;
                    Ok((out.tags().to_vec(), out.marker().filter(|_| out.is_truncated()).map(str::to_owned)))
                })
                .await?
            }
            Api::IamPolicy => {
                read_iam_pages(&mut tags, |marker| async move {
                    let out = c.iam.list_policy_tags().policy_arn(id).set_marker(marker).send().await;
                    let out = out.map_err(|e| CloudError::from_sdk("iam:ListPolicyTags", id, e))?;
                    Ok((out.tags().to_vec(), out.marker().filter(|_| out.is_truncated()).map(str::to_owned)))
                })
                .await?
            }
            Api::IamOidcProvider => {
                read_iam_pages(&mut tags, |marker| async move {
                    let out = c
                        .iam
                        .list_open_id_connect_provider_tags()
                        .open_id_connect_provider_arn(id)
                        .set_marker(marker)
                        .send()
                        .await;
                    let out = out.map_err(|e| CloudError::from_sdk("iam:ListOpenIDConnectProviderTags", id, e))?;
                    Ok((out.tags().to_vec(), out.marker().filter(|_| out.is_truncated()).map(str::to_owned)))
                })
                .await?
            }
        }
        Ok((tags, None))
    }

    /// For instances and volumes, whose describe calls say `NotFound` for ids not visible yet.
    async fn ec2_exists(&self, r: &ResourceRef) -> Result<(), CloudError> {
        let c = &self.clients;
        match r.kind.as_str() {
            "ec2:instance" => {
                c.ec2
                    .describe_instances()
                    .instance_ids(&r.id)
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("ec2:DescribeInstances", &r.id, e))?;
            }
            "ec2:volume" => {
                c.ec2
                    .describe_volumes()
                    .volume_ids(&r.id)
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("ec2:DescribeVolumes", &r.id, e))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Write `set` on the resource in one call. `current` is the tag set the plan was made from;
    /// S3 needs it because `PutBucketTagging` replaces the whole set.
    pub async fn write(&self, r: &ResourceRef, set: &TagMap, current: &TagMap) -> Result<(), CloudError> {
        let c = &self.clients;
        let id = r.id.as_str();
        match api_of(r) {
            Api::Ec2 => self.ec2_create_tags(&[id], set).await?,
            Api::S3 => self.put_bucket_tags(id, set, current).await?,
            Api::Elbv2 => {
                let tags = set
                    .iter()
                    .map(|(k, v)| aws_sdk_elasticloadbalancingv2::types::Tag::builder().key(k).value(v).build());
                c.elbv2
                    .add_tags()
                    .resource_arns(id)
                    .set_tags(Some(tags.collect()))
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("elasticloadbalancing:AddTags", id, e))?;
            }
            Api::ElbClassic => {
                let tags = set
                    .iter()
                    .map(|(k, v)| aws_sdk_elasticloadbalancing::types::Tag::builder().key(k).value(v).build())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| build_error("elasticloadbalancing:AddTags", id, e))?;
                c.elb
                    .add_tags()
                    .load_balancer_names(arn_name(id))
                    .set_tags(Some(tags))
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("elasticloadbalancing:AddTags", id, e))?;
            }
            Api::Route53 => {
                let (rtype, zone) = route53_target(r);
                let tags: Vec<_> =
                    set.iter().map(|(k, v)| aws_sdk_route53::types::Tag::builder().key(k).value(v).build()).collect();
                // ChangeTagsForResource takes at most 10 tags per call (Route 53 API reference).
                for chunk in tags.chunks(ROUTE53_TAGS_PER_CALL) {
                    c.route53
                        .change_tags_for_resource()
                        .resource_type(rtype.clone())
                        .resource_id(zone)
                        .set_add_tags(Some(chunk.to_vec()))
                        .send()
                        .await
                        .map_err(|e| CloudError::from_sdk("route53:ChangeTagsForResource", id, e))?;
                }
            }
            Api::Tagging => {
                let arn = r.arn.as_deref().unwrap_or(id);
                let failed = self.tag_resources(&[arn], set).await?;
                if let Some((_, e)) = failed.into_iter().next() {
                    return Err(e);
                }
            }
            // Spelled out per entity type: the SDK builders share no trait, and tests/iam_policy.rs
            // derives the role's grants from these very calls, which a macro would hide.
            api => {
                let tags = iam_tags(id, set)?;
                let result = match api {
                    Api::IamRole => c
                        .iam
                        .tag_role()
                        .role_name(id)
                        .set_tags(Some(tags))
                        .send()
                        .await
                        .map(drop)
                        .map_err(|e| CloudError::from_sdk("iam:TagRole", id, e)),
                    Api::IamUser => c
                        .iam
                        .tag_user()
                        .user_name(id)
                        .set_tags(Some(tags))
                        .send()
                        .await
                        .map(drop)
                        .map_err(|e| CloudError::from_sdk("iam:TagUser", id, e)),
                    Api::IamInstanceProfile => c
                        .iam
                        .tag_instance_profile()
                        .instance_profile_name(id)
                        .set_tags(Some(tags))
                        .send()
                        .await
                        .map(drop)
                        .map_err(|e| CloudError::from_sdk("iam:TagInstanceProfile", id, e)),
                    Api::IamPolicy => c
                        .iam
                        .tag_policy()
                        .policy_arn(id)
                        .set_tags(Some(tags))
                        .send()
                        .await
                        .map(drop)
                        .map_err(|e| CloudError::from_sdk("iam:TagPolicy", id, e)),
                    _ => c
                        .iam
                        .tag_open_id_connect_provider()
                        .open_id_connect_provider_arn(id)
                        .set_tags(Some(tags))
                        .send()
                        .await
                        .map(drop)
                        .map_err(|e| CloudError::from_sdk("iam:TagOpenIDConnectProvider", id, e)),
                };
                result?;
            }
        }
        Ok(())
    }

    /// Read-merge-write: every tag on the bucket is sent back, `current` being a read made right
    /// before (callers re-read; the sweep never passes its listing). That includes `aws:` system
    /// tags (CloudFormation's, CDK's): S3 refuses a PUT without them ("System Tags cannot be
    /// removed by requester") and refuses any `aws:` key it does not hold already. On
    /// `OperationAborted` (a concurrent change to the bucket) the set is re-read and merged again.
    async fn put_bucket_tags(&self, bucket: &str, set: &TagMap, current: &TagMap) -> Result<(), CloudError> {
        let mut base = current.clone();
        let mut attempt = 0;
        loop {
            let merged: TagMap = base.iter().chain(set).map(|(k, v)| (k.clone(), v.clone())).collect();
            let tags = merged
                .iter()
                .map(|(k, v)| aws_sdk_s3::types::Tag::builder().key(k).value(v).build())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| {
                    CloudError::aws("s3:PutBucketTagging", bucket, "BuildError", &e.to_string(), ErrorClass::Fatal)
                })?;
            let tagging = aws_sdk_s3::types::Tagging::builder().set_tag_set(Some(tags)).build().map_err(|e| {
                CloudError::aws("s3:PutBucketTagging", bucket, "BuildError", &e.to_string(), ErrorClass::Fatal)
            })?;
            match self.clients.s3.put_bucket_tagging().bucket(bucket).tagging(tagging).send().await {
                Ok(_) => return Ok(()),
                Err(e) if e.code() == Some("OperationAborted") && attempt + 1 < self.not_found.attempts => {
                    tokio::time::sleep(self.not_found.delay(attempt)).await;
                    attempt += 1;
                    base = self.read_once(&ResourceRef::s3_bucket(bucket, &self.clients.region)).await?.0;
                }
                Err(e) => return Err(CloudError::from_sdk("s3:PutBucketTagging", bucket, e)),
            }
        }
    }

    /// One `CreateTags` for many EC2 resources sharing the same delta (up to 1000 ids).
    pub async fn ec2_create_tags(&self, ids: &[&str], set: &TagMap) -> Result<(), CloudError> {
        if let Some(limit) = &self.ec2_writes {
            limit.acquire().await;
        }
        let tags = set.iter().map(|(k, v)| aws_sdk_ec2::types::Tag::builder().key(k).value(v).build());
        self.clients
            .ec2
            .create_tags()
            .set_resources(Some(ids.iter().map(|s| s.to_string()).collect()))
            .set_tags(Some(tags.collect()))
            .send()
            .await
            .map(drop)
            .map_err(|e| CloudError::from_sdk("ec2:CreateTags", &batch_name(ids), e))
    }

    /// One `TagResources` for up to 20 ARNs sharing one delta. The call succeeds as a whole even
    /// when some resources fail: each ARN of its `FailedResourcesMap` is returned with its error.
    pub async fn tag_resources(&self, arns: &[&str], set: &TagMap) -> Result<Vec<(String, CloudError)>, CloudError> {
        let out = self
            .clients
            .tagging
            .tag_resources()
            .set_resource_arn_list(Some(arns.iter().map(|s| s.to_string()).collect()))
            .set_tags(Some(set.iter().map(|(k, v)| (k.clone(), v.clone())).collect()))
            .send()
            .await
            .map_err(|e| CloudError::from_sdk("tag:TagResources", &batch_name(arns), e))?;
        let failed = out.failed_resources_map().into_iter().flatten();
        Ok(failed
            .map(|(arn, info)| {
                let code = info.error_code().map(|c| c.as_str().to_string()).unwrap_or_else(|| "Unknown".into());
                let message = info.error_message().unwrap_or_default();
                let class = super::error::classify_tagging_failure(&code, message, Some(info.status_code()));
                (arn.clone(), CloudError::aws("tag:TagResources", arn, &code, message, class))
            })
            .collect())
    }

    /// Route 53 hosted zones and health checks with their tags. Route 53 is global, and the
    /// emulator's Tagging API does not list it: its own listings (100 a page) and
    /// `ListTagsForResources` (10 ids a call) see them from any region.
    pub async fn list_route53(&self) -> Result<Vec<(ResourceRef, TagMap)>, CloudError> {
        use aws_sdk_route53::types::TagResourceType;
        let route53 = &self.clients.route53;
        let partition = crate::resource::partition(&self.clients.region);
        let mut zones = Vec::new();
        let mut marker = None;
        loop {
            let page = route53
                .list_hosted_zones()
                .set_marker(marker)
                .send()
                .await
                .map_err(|e| CloudError::from_sdk("route53:ListHostedZones", "*", e))?;
            zones.extend(page.hosted_zones().iter().map(|z| z.id().trim_start_matches("/hostedzone/").to_string()));
            marker = page.next_marker().filter(|_| page.is_truncated()).map(str::to_owned);
            if marker.is_none() {
                break;
            }
        }
        let mut checks = Vec::new();
        let mut marker = None;
        loop {
            let page = route53
                .list_health_checks()
                .set_marker(marker)
                .send()
                .await
                .map_err(|e| CloudError::from_sdk("route53:ListHealthChecks", "*", e))?;
            checks.extend(page.health_checks().iter().map(|h| h.id().to_string()));
            marker = page.next_marker().filter(|_| page.is_truncated()).map(str::to_owned);
            if marker.is_none() {
                break;
            }
        }
        let mut out = Vec::new();
        for (ids, rtype, kind) in
            [(zones, TagResourceType::Hostedzone, "hostedzone"), (checks, TagResourceType::Healthcheck, "healthcheck")]
        {
            for chunk in ids.chunks(ROUTE53_TAGS_PER_CALL) {
                let page = route53
                    .list_tags_for_resources()
                    .resource_type(rtype.clone())
                    .set_resource_ids(Some(chunk.to_vec()))
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("route53:ListTagsForResources", kind, e))?;
                for set in page.resource_tag_sets() {
                    let Some(id) = set.resource_id() else { continue };
                    let arn = format!("arn:{partition}:route53:::{kind}/{id}");
                    let tags = set
                        .tags()
                        .iter()
                        .map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string()));
                    if let Ok(r) = ResourceRef::from_arn(&arn) {
                        out.push((r, tags.collect()));
                    }
                }
            }
        }
        Ok(out)
    }

    /// The listeners and listener rules of ELBv2 load balancers, with their tags. The Tagging API
    /// lists them on AWS but not in the emulator; one `DescribeListeners` per load balancer, one
    /// `DescribeRules` per listener and one `DescribeTags` per 20 ARNs. Default rules are left out:
    /// they cannot be tagged.
    pub async fn list_elbv2_children(&self, load_balancers: &[&str]) -> Result<Vec<(ResourceRef, TagMap)>, CloudError> {
        let elbv2 = &self.clients.elbv2;
        let mut arns = Vec::new();
        for lb in load_balancers {
            let listeners = elbv2
                .describe_listeners()
                .load_balancer_arn(*lb)
                .send()
                .await
                .map_err(|e| CloudError::from_sdk("elasticloadbalancing:DescribeListeners", lb, e))?;
            for l in listeners.listeners() {
                let Some(listener) = l.listener_arn() else { continue };
                arns.push(listener.to_string());
                let rules = elbv2
                    .describe_rules()
                    .listener_arn(listener)
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("elasticloadbalancing:DescribeRules", listener, e))?;
                arns.extend(
                    rules
                        .rules()
                        .iter()
                        .filter(|r| r.is_default() != Some(true))
                        .filter_map(|r| r.rule_arn())
                        .map(str::to_owned),
                );
            }
        }
        let mut out = Vec::new();
        for chunk in arns.chunks(ELBV2_DESCRIBE_TAGS_MAX) {
            let described = elbv2
                .describe_tags()
                .set_resource_arns(Some(chunk.to_vec()))
                .send()
                .await
                .map_err(|e| CloudError::from_sdk("elasticloadbalancing:DescribeTags", &chunk[0], e))?;
            for d in described.tag_descriptions() {
                let Some(r) = d.resource_arn().and_then(|a| ResourceRef::from_arn(a).ok()) else { continue };
                let tags = d
                    .tags()
                    .iter()
                    .map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string()));
                out.push((r, tags.collect()));
            }
        }
        Ok(out)
    }

    /// IAM entities of every kind tagwarden enforces, with their tags where one listing carries
    /// them. `GetAccountAuthorizationDetails` returns roles and users with their tags (and the
    /// instance profiles attached to the roles, with theirs), up to 1000 entities a page: one
    /// call where `ListRoles`/`ListUsers` plus a `ListRoleTags`/`ListUserTags` per entity took
    /// one per entity — those listings return no tags. Instance profiles attached to no role,
    /// customer managed policies and OIDC providers are listed bare and read one by one.
    pub async fn list_iam(&self) -> Result<Vec<(ResourceRef, Option<TagMap>)>, CloudError> {
        use aws_sdk_iam::types::EntityType;
        let iam = &self.clients.iam;
        let tag_map = |tags: &[aws_sdk_iam::types::Tag]| -> TagMap {
            tags.iter().map(|t| (t.key().to_string(), t.value().to_string())).collect()
        };
        let mut out: Vec<(ResourceRef, Option<TagMap>)> = Vec::new();
        let mut marker = None;
        loop {
            let page = iam
                .get_account_authorization_details()
                .filter(EntityType::Role)
                .filter(EntityType::User)
                .max_items(1000)
                .set_marker(marker)
                .send()
                .await
                .map_err(|e| CloudError::from_sdk("iam:GetAccountAuthorizationDetails", "*", e))?;
            for role in page.role_detail_list() {
                let Some(r) = role.arn().and_then(|a| ResourceRef::from_arn(a).ok()) else { continue };
                out.push((r, Some(tag_map(role.tags()))));
                for profile in role.instance_profile_list() {
                    let Ok(p) = ResourceRef::from_arn(profile.arn()) else { continue };
                    if !out.iter().any(|(o, _)| o.arn == p.arn) {
                        out.push((p, Some(tag_map(profile.tags()))));
                    }
                }
            }
            for user in page.user_detail_list() {
                let Some(r) = user.arn().and_then(|a| ResourceRef::from_arn(a).ok()) else { continue };
                out.push((r, Some(tag_map(user.tags()))));
            }
            marker = page.marker().filter(|_| page.is_truncated()).map(str::to_owned);
            if marker.is_none() {
                break;
            }
        }
        let mut bare = Vec::new();
        let mut marker = None;
        loop {
            let page = iam
                .list_instance_profiles()
                .max_items(1000)
                .set_marker(marker)
                .send()
                .await
                .map_err(|e| CloudError::from_sdk("iam:ListInstanceProfiles", "*", e))?;
            bare.extend(page.instance_profiles().iter().filter_map(|p| ResourceRef::from_arn(p.arn()).ok()));
            marker = page.marker().filter(|_| page.is_truncated()).map(str::to_owned);
            if marker.is_none() {
                break;
            }
        }
        let mut marker = None;
        loop {
            let page = iam
                .list_policies()
                .scope(aws_sdk_iam::types::PolicyScopeType::Local)
                .max_items(1000)
                .set_marker(marker)
                .send()
                .await
                .map_err(|e| CloudError::from_sdk("iam:ListPolicies", "*", e))?;
            bare.extend(page.policies().iter().filter_map(|p| p.arn().and_then(|a| ResourceRef::from_arn(a).ok())));
            marker = page.marker().filter(|_| page.is_truncated()).map(str::to_owned);
            if marker.is_none() {
                break;
            }
        }
        let providers = iam
            .list_open_id_connect_providers()
            .send()
            .await
            .map_err(|e| CloudError::from_sdk("iam:ListOpenIDConnectProviders", "*", e))?;
        bare.extend(
            providers
                .open_id_connect_provider_list()
                .iter()
                .filter_map(|p| p.arn().and_then(|a| ResourceRef::from_arn(a).ok())),
        );
        // Attached instance profiles came with their tags already.
        bare.retain(|b| !out.iter().any(|(o, _)| o.arn == b.arn));
        out.extend(bare.into_iter().map(|r| (r, None)));
        Ok(out)
    }

    /// The tags of many EC2 resources in as few `DescribeTags` calls as the filter allows: each
    /// call names up to [`EC2_IDS_PER_DESCRIBE`] ids and pages at 1000 tags. An id with no tag at
    /// all is absent from the answer (as is one that does not exist yet), so it is left out here:
    /// the caller reads it alone, waiting out eventual consistency.
    pub async fn ec2_describe_tags_many(
        &self,
        ids: &[&str],
    ) -> Result<std::collections::HashMap<String, TagMap>, CloudError> {
        let mut found: std::collections::HashMap<String, TagMap> = std::collections::HashMap::new();
        for chunk in ids.chunks(EC2_IDS_PER_DESCRIBE) {
            let filter = ids_filter("resource-id", chunk);
            let mut token = None;
            loop {
                let out = self
                    .clients
                    .ec2
                    .describe_tags()
                    .filters(filter.clone())
                    .max_results(1000)
                    .set_next_token(token)
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("ec2:DescribeTags", &batch_name(chunk), e))?;
                for t in out.tags() {
                    let (Some(id), Some(key)) = (t.resource_id(), t.key()) else { continue };
                    found
                        .entry(id.to_string())
                        .or_default()
                        .insert(key.to_string(), t.value().unwrap_or_default().to_string());
                }
                token = out.next_token().filter(|t| !t.is_empty()).map(str::to_owned);
                if token.is_none() {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// The volumes attached to each of many instances, with their tags, in as few
    /// `DescribeVolumes` calls as the filter allows; an instance with none yet is absent.
    pub async fn attached_volumes_many(
        &self,
        instance_ids: &[&str],
    ) -> Result<std::collections::HashMap<String, Vec<(String, TagMap)>>, CloudError> {
        let mut found: std::collections::HashMap<String, Vec<(String, TagMap)>> = std::collections::HashMap::new();
        for chunk in instance_ids.chunks(EC2_IDS_PER_DESCRIBE) {
            let filter = ids_filter("attachment.instance-id", chunk);
            let mut token = None;
            loop {
                let out = self
                    .clients
                    .ec2
                    .describe_volumes()
                    .filters(filter.clone())
                    .max_results(500)
                    .set_next_token(token)
                    .send()
                    .await
                    .map_err(|e| CloudError::from_sdk("ec2:DescribeVolumes", &batch_name(chunk), e))?;
                for v in out.volumes() {
                    let Some(volume) = v.volume_id() else { continue };
                    let tags: TagMap = v
                        .tags()
                        .iter()
                        .map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string()))
                        .collect();
                    for instance in v.attachments().iter().filter_map(|a| a.instance_id()) {
                        found.entry(instance.to_string()).or_default().push((volume.to_string(), tags.clone()));
                    }
                }
                token = out.next_token().filter(|t| !t.is_empty()).map(str::to_owned);
                if token.is_none() {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// The volumes attached to each of many instances, with their tags: `RunInstances` events do
    /// not name them, and `DescribeVolumes` already carries the tags, so no second read is needed.
    /// One shared `DescribeVolumes`; the EBS-backed instances (one shared `DescribeInstances`)
    /// whose volumes are not attached yet are asked again together with the read backoff; after
    /// that the error is retryable, so the event comes back rather than leaving the volumes to the
    /// next sweep. Each instance's volumes, or why they could not be found.
    pub async fn attached_volumes_waiting(
        &self,
        instance_ids: &[&str],
    ) -> std::collections::HashMap<String, Result<Vec<(String, TagMap)>, CloudError>> {
        let mut out = std::collections::HashMap::new();
        let fail_all = |ids: &[&str], e: &CloudError, out: &mut std::collections::HashMap<_, _>| {
            for id in ids {
                out.insert(id.to_string(), Err(e.clone()));
            }
        };
        let mut missing: Vec<&str> = instance_ids.to_vec();
        let mut ebs_checked = false;
        let mut attempt = 0;
        loop {
            match self.attached_volumes_many(&missing).await {
                Ok(found) => {
                    for (id, volumes) in found {
                        out.insert(id, Ok(volumes));
                    }
                }
                Err(e) => {
                    fail_all(&missing, &e, &mut out);
                    return out;
                }
            }
            missing.retain(|id| !out.contains_key(*id));
            if missing.is_empty() {
                return out;
            }
            if !ebs_checked {
                ebs_checked = true;
                match self.ebs_backed_many(&missing).await {
                    // An instance-store root has no volume to wait for.
                    Ok(ebs) => missing.retain(|id| {
                        let wait = ebs.contains(*id);
                        if !wait {
                            out.insert(id.to_string(), Ok(Vec::new()));
                        }
                        wait
                    }),
                    Err(e) => {
                        fail_all(&missing, &e, &mut out);
                        return out;
                    }
                }
                if missing.is_empty() {
                    return out;
                }
            }
            if attempt + 1 >= self.not_found.attempts {
                let e = CloudError::aws(
                    "ec2:DescribeVolumes",
                    &batch_name(&missing),
                    "VolumesNotAttachedYet",
                    "the EBS-backed instance has no attached volume yet",
                    ErrorClass::NotFound,
                );
                fail_all(&missing, &e, &mut out);
                return out;
            }
            tokio::time::sleep(self.not_found.delay(attempt)).await;
            attempt += 1;
        }
    }

    /// Which of `instance_ids` have an EBS root device, in shared `DescribeInstances` calls.
    async fn ebs_backed_many(&self, instance_ids: &[&str]) -> Result<std::collections::HashSet<String>, CloudError> {
        let mut ebs = std::collections::HashSet::new();
        for chunk in instance_ids.chunks(EC2_IDS_PER_DESCRIBE) {
            let out = self
                .clients
                .ec2
                .describe_instances()
                .set_instance_ids(Some(chunk.iter().map(|s| s.to_string()).collect()))
                .send()
                .await
                .map_err(|e| CloudError::from_sdk("ec2:DescribeInstances", &batch_name(chunk), e))?;
            for i in out.reservations().iter().flat_map(|r| r.instances()) {
                if i.root_device_type() == Some(&aws_sdk_ec2::types::DeviceType::Ebs) {
                    ebs.extend(i.instance_id().map(str::to_owned));
                }
            }
        }
        Ok(ebs)
    }
}

/// EC2 ids named in one `resource-id` (or `attachment.instance-id`) filter. The API reference
/// models no maximum for a filter's values; 200 keeps each query-string request small, and at
/// 5 tags an id, one 1000-tag page.
pub const EC2_IDS_PER_DESCRIBE: usize = 200;

/// An EC2 filter `name` matching any of `ids`.
fn ids_filter(name: &str, ids: &[&str]) -> aws_sdk_ec2::types::Filter {
    aws_sdk_ec2::types::Filter::builder()
        .name(name)
        .set_values(Some(ids.iter().map(|s| s.to_string()).collect()))
        .build()
}

/// ELBv2 `DescribeTags` names at most 20 resources.
const ELBV2_DESCRIBE_TAGS_MAX: usize = 20;

/// Route 53 `ChangeTagsForResource`: `AddTags` holds at most 10 tags.
const ROUTE53_TAGS_PER_CALL: usize = 10;

/// The Route 53 resource type and id an ARN (`arn:aws:route53:::hostedzone/Z…`) names.
fn route53_target(r: &ResourceRef) -> (aws_sdk_route53::types::TagResourceType, &str) {
    let arn = r.arn.as_deref().unwrap_or(&r.id);
    let rtype = if r.kind == "route53:healthcheck" {
        aws_sdk_route53::types::TagResourceType::Healthcheck
    } else {
        aws_sdk_route53::types::TagResourceType::Hostedzone
    };
    (rtype, arn_name(arn))
}

fn build_error(operation: &'static str, id: &str, e: impl std::fmt::Display) -> CloudError {
    CloudError::aws(operation, id, "BuildError", &e.to_string(), ErrorClass::Fatal)
}

fn iam_pair(t: &aws_sdk_iam::types::Tag) -> (String, String) {
    (t.key().to_string(), t.value().to_string())
}

fn iam_tags(id: &str, set: &TagMap) -> Result<Vec<aws_sdk_iam::types::Tag>, CloudError> {
    set.iter()
        .map(|(k, v)| aws_sdk_iam::types::Tag::builder().key(k).value(v).build())
        .collect::<Result<_, _>>()
        .map_err(|e| CloudError::aws("iam:Tag", id, "BuildError", &e.to_string(), ErrorClass::Fatal))
}

/// How a batch is named in errors: its first id and how many more.
fn batch_name(ids: &[&str]) -> String {
    match ids {
        [] => String::new(),
        [one] => one.to_string(),
        [first, rest @ ..] => format!("{first} and {} more", rest.len()),
    }
}
