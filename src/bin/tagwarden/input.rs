//! Reading the CLI's inputs: policy files or directories, tag maps.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::Value;
use tagwarden::cloud::Cloud;
use tagwarden::policy::{self, Policy};
use tagwarden::TagMap;

/// Load a policy from files and/or directories; a directory contributes every `.yaml`, `.yml`
/// and `.json` file in it (not the status report), merged in name order like an S3 prefix.
/// With the `aws` feature, `s3://bucket/key`, `s3://bucket/prefix/` and `ssm:/name` are read
/// from AWS, as the Lambda reads them.
pub fn read_policy(paths: &[PathBuf]) -> anyhow::Result<(Policy, Vec<(String, policy::load::DocumentKind)>)> {
    let mut docs = Vec::new();
    for path in paths {
        let text = path.to_string_lossy();
        if text.starts_with("s3://") || text.starts_with("ssm:") {
            docs.extend(read_remote(&text)?);
            continue;
        }
        if path.is_dir() {
            let mut files = Vec::new();
            let entries =
                std::fs::read_dir(path).with_context(|| format!("cannot read policy directory {}", path.display()))?;
            for entry in entries {
                let file = entry.with_context(|| format!("cannot read policy directory {}", path.display()))?.path();
                let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let policy_ext = matches!(file.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"));
                if file.is_file() && policy_ext && !name.starts_with('.') && name != policy::STATUS_REPORT_NAME {
                    files.push((name, file));
                }
            }
            if files.is_empty() {
                bail!("policy directory {} holds no .yaml, .yml or .json file", path.display());
            }
            // Counted before anything is read, as the function counts a listing.
            let max = policy::load::MAX_CLUSTER_DOCUMENTS;
            if files.len() > max {
                let fix = "merge documents: a policy is usually one to three";
                let why = policy::load::over_limit(
                    &path.display().to_string(),
                    files.len(),
                    "documents",
                    "MAX_CLUSTER_DOCUMENTS",
                    max,
                    fix,
                );
                return Err(policy::PolicyError::OverLimit(why).into());
            }
            for (name, file) in files {
                docs.push((name, read_text(&file)?));
            }
        } else {
            docs.push((path.display().to_string(), read_text(path)?));
        }
    }
    // Loaded first: its limits refuse before any document is parsed.
    let policy = policy::load(docs.clone())?;
    let kinds = docs
        .iter()
        .map(|(name, text)| policy::load::detect(name, text).map(|k| (name.clone(), k)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut kinds = kinds;
    kinds.sort();
    Ok((policy, kinds))
}

#[cfg(feature = "aws")]
fn read_remote(location: &str) -> anyhow::Result<Vec<(String, String)>> {
    use tagwarden::aws::policy_store::{policy_store, PolicyLocation};
    let location: PolicyLocation = location.parse().map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Runtime::new().context("tokio runtime")?;
    runtime.block_on(async {
        let config = tagwarden::aws::load_config().await?;
        tagwarden::aws::preflight(&config).await?;
        let clients = tagwarden::aws::Clients::new(&config);
        let store = policy_store(&clients, location.clone(), std::time::Duration::ZERO);
        let docs = store.documents().await.with_context(|| format!("cannot read the policy at {location}"))?;
        if docs.is_empty() {
            bail!("{location} holds no policy document");
        }
        Ok(docs)
    })
}

#[cfg(not(feature = "aws"))]
fn read_remote(location: &str) -> anyhow::Result<Vec<(String, String)>> {
    bail!("{location}: this tagwarden was built without AWS support; rebuild with --features aws")
}

pub fn read_text(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// A resource's current tags: a JSON map, or a list of `{Key, Value}` / `{key, value}` as the
/// AWS CLI prints them (optionally under `Tags` / `TagSet`).
pub fn read_tags(path: &Path) -> anyhow::Result<TagMap> {
    let text = read_text(path)?;
    let value: Value = serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?;
    let value = match &value {
        Value::Object(m) if m.len() == 1 && (m.contains_key("Tags") || m.contains_key("TagSet")) => {
            m.values().next().cloned().unwrap_or(Value::Null)
        }
        _ => value,
    };
    let bad = || {
        anyhow::anyhow!(
            "{}: expected a JSON map of tag keys to string values, or a list of {{\"Key\": …, \"Value\": …}}",
            path.display()
        )
    };
    match value {
        Value::Object(m) => {
            m.into_iter().map(|(k, v)| v.as_str().map(|v| (k, v.to_string())).ok_or_else(bad)).collect()
        }
        Value::Array(items) => items
            .iter()
            .map(|item| {
                let get =
                    |a: &str, b: &str| item.get(a).or_else(|| item.get(b)).and_then(Value::as_str).map(str::to_owned);
                get("Key", "key").zip(get("Value", "value")).ok_or_else(bad)
            })
            .collect(),
        _ => Err(bad()),
    }
}

/// Input the command refuses (exit 1), as opposed to input it could not read (exit 3).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

/// The cloud to validate for: the flag, else the policy's; they must agree.
pub fn resolve_cloud(flag: Option<Cloud>, policy: &Policy) -> anyhow::Result<Cloud> {
    let invalid = |m: String| Err(InvalidInput(m).into());
    match (flag, policy.cloud) {
        (Some(f), Some(p)) if f != p => invalid(format!("--cloud {f} contradicts the policy, which is for {p}")),
        (Some(c), _) | (None, Some(c)) => Ok(c),
        (None, None) => invalid("the policy does not say which cloud it is for (a bare tag map, or a tagwarden.yaml without `cloud`): pass --cloud aws or --cloud azure".to_string()),
    }
}

pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
