//! `tagwarden sweep` on Azure: a blob policy (or one on this machine, previewed) and the scopes
//! to list, with the ARM token the person gives.

#[cfg(feature = "azure")]
use anyhow::Context;

use super::engine::Swept;
use super::Args;
#[cfg(feature = "azure")]
use super::{engine::run_engine, listed};

#[cfg(feature = "azure")]
pub(super) async fn sweep(args: &Args) -> anyhow::Result<Swept> {
    use std::sync::Arc;
    use tagwarden::azure::adapter::ArmTagger;
    use tagwarden::azure::arm::arm_audience;
    use tagwarden::azure::arm::ArmClient;
    use tagwarden::azure::blob_store::{blob_policy_store, BlobLocation};
    use tagwarden::azure::identity::ManagedIdentity;
    use tagwarden::calls::CallCounter;

    let local = crate::local::is_local(&args.policy);
    let location: Option<BlobLocation> =
        if local { None } else { Some(args.policy.parse().map_err(anyhow::Error::msg)?) };
    if let Some(location) = &location {
        if !location.has_sas() {
            anyhow::bail!(
                "{location}: the CLI reads the policy blob with a SAS only; append one to the URL (az storage blob generate-sas --as-user …)"
            );
        }
    }
    if args.scope.is_empty() {
        anyhow::bail!(
            "an Azure sweep needs --scope: the subscription (/subscriptions/ID), resource group (/subscriptions/ID/resourceGroups/NAME) or management group (/providers/Microsoft.Management/managementGroups/ID) to list owned resources in; repeat it for several"
        );
    }
    if let Err(why) = tagwarden::azure::resource_graph::Scopes::parse(&args.scope) {
        anyhow::bail!("--scope: {why}: expected /subscriptions/ID[/resourceGroups/NAME] or /providers/Microsoft.Management/managementGroups/ID");
    }
    let token = std::env::var("TAGWARDEN_ARM_TOKEN").ok().filter(|t| !t.trim().is_empty()).context(
        "an Azure sweep needs an ARM access token in TAGWARDEN_ARM_TOKEN: export TAGWARDEN_ARM_TOKEN=$(az account get-access-token --resource https://management.azure.com/ --query accessToken -o tsv)",
    )?;
    let endpoint: tagwarden::azure::reqwest::Url =
        args.arm_endpoint.parse().with_context(|| format!("--arm-endpoint {:?} is not a URL", args.arm_endpoint))?;
    let http = tagwarden::azure::http_client(std::time::Duration::from_secs(30)).context("HTTP client")?;
    let calls = CallCounter::default();
    let audience = arm_audience(&endpoint, std::env::var("TAGWARDEN_ARM_AUDIENCE").ok().as_deref());
    // A token whose claims cannot be read still writes as its principal: say so, unnamed (ARM
    // verifies the token, not this).
    let principal: anyhow::Result<String> = Ok(token_principal(token.trim())
        .unwrap_or_else(|why| format!("the principal of TAGWARDEN_ARM_TOKEN (not named: {why})")));
    let caller = async move { principal };
    let identity = Arc::new(ManagedIdentity::given(&audience, token.trim().to_string(), calls.clone()));
    let arm = ArmClient::new(http.clone(), endpoint, identity, calls.clone()).with_audience(&audience);
    let adapter = ArmTagger { resource_graph: !args.no_resource_graph, ..ArmTagger::new(arm, args.scope.clone()) };
    let counted = calls.clone();
    let api_calls = move || counted.snapshot();
    match location {
        None => {
            let source = crate::local::LocalSource::open(&args.policy, tagwarden::cloud::Cloud::Azure)?;
            let set = source.is_set();
            let clusters = listed(args, set, &args.policy)?;
            let store =
                tagwarden::policy_store::PolicyStore::new(source, std::time::Duration::ZERO).with_clusters(clusters);
            run_engine(args, crate::local::Local(adapter), store, caller, api_calls).await
        }
        Some(location) => {
            let clusters = listed(args, location.is_set, &location)?;
            let store = blob_policy_store(location.clone(), std::time::Duration::ZERO, http, None, calls.clone())
                .with_clusters(clusters);
            let mut swept = run_engine(args, adapter, store, caller, api_calls).await?;
            swept.policy = location.to_string();
            Ok(swept)
        }
    }
}

/// Who an ARM access token names: its `upn` (or `unique_name`, `email`), else its application
/// (`appid`/`azp`) and object (`oid`) ids — read from the token's claims, not verified (ARM
/// verifies it; this only says whose it is).
#[cfg(feature = "azure")]
fn token_principal(token: &str) -> Result<String, UnnamedPrincipal> {
    let payload = token.split('.').nth(1).ok_or(UnnamedPrincipal::NotAJwt)?;
    let bytes = base64url(payload).ok_or(UnnamedPrincipal::NotBase64url)?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).map_err(UnnamedPrincipal::NotJson)?;
    let claim = |k: &str| claims.get(k).and_then(|v| v.as_str()).filter(|v| !v.is_empty());
    let tenant = claim("tid").map(|t| format!(", tenant {t}")).unwrap_or_default();
    if let Some(user) = claim("upn").or_else(|| claim("unique_name")).or_else(|| claim("email")) {
        return Ok(format!("{user} (object id {}{tenant})", claim("oid").unwrap_or("?")));
    }
    match (claim("appid").or_else(|| claim("azp")), claim("oid")) {
        (Some(app), oid) => {
            Ok(format!("service principal, client id {app} (object id {}{tenant})", oid.unwrap_or("?")))
        }
        (None, Some(oid)) => Ok(format!("principal object id {oid}{tenant}")),
        (None, None) => Err(UnnamedPrincipal::NoPrincipalClaim),
    }
}

/// Why the ARM token's principal cannot be named (the sweep still writes as it; ARM verifies
/// the token): each says what the token lacks.
#[cfg(feature = "azure")]
#[derive(Debug, thiserror::Error)]
enum UnnamedPrincipal {
    #[error("TAGWARDEN_ARM_TOKEN is not a JWT")]
    NotAJwt,
    #[error("TAGWARDEN_ARM_TOKEN's claims are not base64url")]
    NotBase64url,
    #[error("TAGWARDEN_ARM_TOKEN's claims are not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("TAGWARDEN_ARM_TOKEN names no principal (no upn, appid or oid claim)")]
    NoPrincipalClaim,
}

/// Base64url without padding (a JWT's segments), or standard base64.
#[cfg(feature = "azure")]
fn base64url(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
            bits &= (1 << n) - 1;
        }
    }
    Some(out)
}

#[cfg(not(feature = "azure"))]
pub(super) async fn sweep(args: &Args) -> anyhow::Result<Swept> {
    anyhow::bail!("{}: this build has no Azure support; build tagwarden with --features azure", args.policy)
}
