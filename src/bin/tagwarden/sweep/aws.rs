//! `tagwarden sweep` on AWS: an S3 or SSM policy (or one on this machine, previewed), the
//! caller's own credentials.

use super::engine::Swept;
use super::Args;
#[cfg(feature = "aws")]
use super::{engine::run_engine, listed};

#[cfg(feature = "aws")]
pub(super) async fn sweep(args: &Args) -> anyhow::Result<Swept> {
    use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
    use tagwarden::aws::Clients;
    use tagwarden::aws::Tagger;

    let local = crate::local::is_local(&args.policy);
    let location: Option<PolicyLocation> =
        if local { None } else { Some(args.policy.parse().map_err(anyhow::Error::msg)?) };
    let mut loader = tagwarden::aws::config_loader()?;
    if let Some(r) = &args.region {
        loader = loader.region(aws_config::Region::new(r.clone()));
    }
    let config = loader.load().await;
    tagwarden::aws::preflight(&config).await?;
    let clients = Clients::new(&config);
    let tagger = Tagger { ec2_batch: usize::from(args.ec2_batch), ..Tagger::new(clients.clone()) };
    let sts = tagwarden::aws::sdk::sts::Client::new(&config);
    let caller = async move {
        match sts.get_caller_identity().send().await {
            Ok(out) => out.arn().map(str::to_owned).ok_or_else(|| anyhow::anyhow!("STS named no ARN")),
            Err(e) => Err(anyhow::anyhow!(
                "sts:GetCallerIdentity: {}",
                tagwarden::aws::sdk::sts::error::DisplayErrorContext(e)
            )),
        }
    };
    let calls = clients.calls.clone();
    let api_calls = move || calls.snapshot();
    match location {
        None => {
            let source = crate::local::LocalSource::open(&args.policy, tagwarden::cloud::Cloud::Aws)?;
            let set = source.is_set();
            let clusters = listed(args, set, &args.policy)?;
            let store =
                tagwarden::policy_store::PolicyStore::new(source, std::time::Duration::ZERO).with_clusters(clusters);
            run_engine(args, crate::local::Local(tagger), store, caller, api_calls).await
        }
        Some(location) => {
            let set = matches!(location, PolicyLocation::S3Set { .. } | PolicyLocation::SsmSet { .. });
            let clusters = listed(args, set, &location)?;
            let store = policy_store(&clients, location.clone(), std::time::Duration::ZERO).with_clusters(clusters);
            let mut swept = run_engine(args, tagger, store, caller, api_calls).await?;
            swept.policy = location.to_string();
            Ok(swept)
        }
    }
}

#[cfg(not(feature = "aws"))]
pub(super) async fn sweep(args: &Args) -> anyhow::Result<Swept> {
    anyhow::bail!("{}: this build has no AWS support; build tagwarden with --features aws", args.policy)
}
