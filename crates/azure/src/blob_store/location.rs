//! Where a blob policy lives: the container's URL, the blob's name or the prefix (a cluster set's
//! folders under it), and the SAS, which is never printed.

use std::fmt;

use reqwest::Url;
use tagwarden_core::policy::STATUS_REPORT_NAME;

/// Where the policy lives.
#[derive(Clone, PartialEq, Eq)]
pub struct BlobLocation {
    /// `scheme://host[:port]/[account/]container`, no query.
    container: Url,
    /// The blob name, or the prefix (`""` or ending in `/`).
    pub name: String,
    /// A SAS query string, passed through as-is. Never printed.
    sas: Option<String>,
    pub is_prefix: bool,
    /// A cluster set: `name` is the prefix its clusters' folders are under.
    pub is_set: bool,
}

impl fmt::Debug for BlobLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlobLocation({self})")
    }
}

/// Printed without the SAS: a SAS is a credential.
impl fmt::Display for BlobLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.container.as_str().trim_end_matches('/'), self.name)?;
        if self.is_set {
            f.write_str("*/")?;
        }
        if self.sas.is_some() {
            f.write_str("?<sas>")?;
        }
        Ok(())
    }
}

/// What a policy location must look like, as its errors say.
const BLOB_LOCATION_USAGE: &str = "expected https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB (one document), …/CONTAINER/PREFIX/ (every document under it, ending in /) or …/CONTAINER/PREFIX/*/ (a cluster set: one policy per cluster under PREFIX/<infraID>/), optionally with a SAS query string; for Azurite http://127.0.0.1:10000/devstoreaccount1/CONTAINER/…";

/// Why a text is no blob policy location: each names the location without its query (a SAS is a
/// credential) and says what one looks like.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlobLocationError {
    #[error("policy location {shown:?} is not a URL ({error}): {BLOB_LOCATION_USAGE}")]
    NotAUrl { shown: String, error: <Url as std::str::FromStr>::Err },
    #[error("policy location {0:?} is not an http(s) URL: {BLOB_LOCATION_USAGE}")]
    NotHttp(String),
    #[error("policy location {0:?} names no host: {BLOB_LOCATION_USAGE}")]
    NoHost(String),
    #[error("policy location {0:?} names no storage account (path-style URL): {BLOB_LOCATION_USAGE}")]
    NoAccount(String),
    #[error("policy location {0:?} names no container: {BLOB_LOCATION_USAGE}")]
    NoContainer(String),
    #[error(
        "policy location {0:?}: a cluster set is written …/CONTAINER/PREFIX/*/ (the * alone, as the last folder): {BLOB_LOCATION_USAGE}"
    )]
    MisplacedStar(String),
}

impl std::str::FromStr for BlobLocation {
    type Err = BlobLocationError;

    fn from_str(s: &str) -> Result<Self, BlobLocationError> {
        // Messages show the URL without its query: a SAS is a credential.
        let shown = || s.split('?').next().unwrap_or_default().to_string();
        let url = Url::parse(s).map_err(|error| BlobLocationError::NotAUrl { shown: shown(), error })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(BlobLocationError::NotHttp(shown()));
        }
        let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
            return Err(BlobLocationError::NoHost(shown()));
        };
        let path_style = host.eq_ignore_ascii_case("localhost")
            || host.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>().is_ok();
        let path = url.path().trim_start_matches('/');
        let mut parts = path.splitn(if path_style { 3 } else { 2 }, '/');
        let account = if path_style { parts.next().filter(|a| !a.is_empty()) } else { None };
        if path_style && account.is_none() {
            return Err(BlobLocationError::NoAccount(shown()));
        }
        let container =
            parts.next().filter(|c| !c.is_empty()).ok_or_else(|| BlobLocationError::NoContainer(shown()))?;
        let name = percent_decode(parts.next().unwrap_or_default());
        let mut base = url.clone();
        base.set_query(None);
        base.set_fragment(None);
        base.set_path(&match account {
            Some(a) => format!("/{a}/{container}"),
            None => format!("/{container}"),
        });
        let sas = url.query().filter(|q| !q.is_empty()).map(str::to_owned);
        let (name, is_set) = match name.strip_suffix("*/").filter(|p| p.is_empty() || p.ends_with('/')) {
            Some(prefix) => (prefix.to_string(), true),
            None if name.contains('*') => return Err(BlobLocationError::MisplacedStar(shown())),
            None => (name, false),
        };
        let is_prefix = name.is_empty() || name.ends_with('/');
        Ok(BlobLocation { container: base, name, sas, is_prefix, is_set })
    }
}

impl BlobLocation {
    pub fn has_sas(&self) -> bool {
        self.sas.is_some()
    }

    /// Sign requests with `sas`, given apart from the URL (from a Secret, never a ConfigMap).
    pub fn set_sas(&mut self, sas: &str) {
        let sas = sas.trim().trim_start_matches('?');
        self.sas = (!sas.is_empty()).then(|| sas.to_string());
    }

    /// When the SAS stops working: its signed expiry `se` (ISO 8601, date or UTC time), in ms
    /// since the epoch.
    pub fn sas_expiry_ms(&self) -> Option<u64> {
        let sas = self.sas.as_deref()?;
        let se = sas.split('&').find_map(|p| p.strip_prefix("se="))?;
        let mut se = percent_decode(se);
        // `az storage blob generate-sas --expiry` writes minutes only (`2026-12-01T00:00Z`), and a
        // date alone is midnight UTC: both are ISO 8601 as the SAS documentation allows.
        if se.len() == 10 {
            se.push_str("T00:00:00Z");
        } else if se.len() >= 17 && se.as_bytes().get(13) == Some(&b':') && se.as_bytes().get(16) != Some(&b':') {
            se.insert_str(16, ":00");
        }
        let at = tagwarden_core::events::parse_rfc3339_ms(&se);
        if at.is_none() {
            tracing::warn!(se = %se, "the SAS's expiry (se) cannot be read: its expiry is not reported ahead");
        }
        at
    }

    /// The URL of blob `name` in the container, with the SAS.
    pub fn blob_url(&self, name: &str) -> Url {
        let mut u = self.container.clone();
        if let Ok(mut segs) = u.path_segments_mut() {
            segs.pop_if_empty();
            for seg in name.split('/') {
                segs.push(seg);
            }
        }
        u.set_query(self.sas.as_deref());
        u
    }

    pub(super) fn list_url(&self, marker: Option<&str>) -> Url {
        let mut u = self.container.clone();
        u.set_query(self.sas.as_deref());
        {
            let mut q = u.query_pairs_mut();
            q.append_pair("restype", "container").append_pair("comp", "list").append_pair("prefix", &self.name);
            if let Some(m) = marker {
                q.append_pair("marker", m);
            }
        }
        u
    }

    /// Where the status report goes: beside the blob, under the prefix, or in a set under cluster
    /// `cluster`'s folder.
    pub fn status_name(&self, cluster: Option<&str>) -> String {
        if let (true, Some(c)) = (self.is_set, cluster) {
            format!("{}{c}/{STATUS_REPORT_NAME}", self.name)
        } else if self.is_prefix {
            format!("{}{STATUS_REPORT_NAME}", self.name)
        } else {
            let dir = self.name.rsplit_once('/').map(|(d, _)| format!("{d}/")).unwrap_or_default();
            format!("{dir}{STATUS_REPORT_NAME}")
        }
    }

    /// A blob's URL as logs may show it (no SAS).
    pub fn display_name(&self, name: &str) -> String {
        format!("{}/{name}", self.container.as_str().trim_end_matches('/'))
    }
}

pub(super) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(s: &str) -> BlobLocation {
        s.parse().expect(s)
    }

    #[test]
    fn a_sas_says_when_it_expires_and_a_secret_can_supply_it() {
        let mut l = loc("https://acct.blob.core.windows.net/policy/p.yaml");
        assert!(!l.has_sas() && l.sas_expiry_ms().is_none());
        l.set_sas("?sv=2022-11-02&sp=rw&se=2026-12-01T00%3A00%3A00Z&sig=abc");
        assert_eq!(l.sas_expiry_ms(), tagwarden_core::events::parse_rfc3339_ms("2026-12-01T00:00:00Z"));
        assert_eq!(l.blob_url("p.yaml").query(), Some("sv=2022-11-02&sp=rw&se=2026-12-01T00%3A00%3A00Z&sig=abc"));
        l.set_sas("sv=2022-11-02&se=2026-12-02&sig=x");
        assert_eq!(
            l.sas_expiry_ms(),
            tagwarden_core::events::parse_rfc3339_ms("2026-12-02T00:00:00Z"),
            "a date alone is midnight UTC"
        );
        l.set_sas("sv=2022-11-02&se=2026-12-03T10%3A30Z&sig=x");
        assert_eq!(
            l.sas_expiry_ms(),
            tagwarden_core::events::parse_rfc3339_ms("2026-12-03T10:30:00Z"),
            "minutes, as az writes it"
        );
        l.set_sas("  ");
        assert!(!l.has_sas());
    }

    #[test]
    fn locations() {
        let l = loc("https://acct.blob.core.windows.net/policy/cluster/infrastructure.yaml");
        assert!(!l.is_prefix);
        assert_eq!(l.name, "cluster/infrastructure.yaml");
        assert_eq!(l.status_name(None), "cluster/tagwarden-status.json");
        assert_eq!(l.blob_url("a/b.yaml").as_str(), "https://acct.blob.core.windows.net/policy/a/b.yaml");

        let l = loc("http://127.0.0.1:10000/devstoreaccount1/policy/layers/?sv=2020-08-04&sig=abc%2B");
        assert!(l.is_prefix && l.has_sas());
        assert_eq!(l.name, "layers/");
        assert_eq!(l.status_name(None), "layers/tagwarden-status.json");
        assert_eq!(
            l.blob_url("layers/00 base.yaml").as_str(),
            "http://127.0.0.1:10000/devstoreaccount1/policy/layers/00%20base.yaml?sv=2020-08-04&sig=abc%2B"
        );
        let list = l.list_url(Some("m1")).to_string();
        assert!(list.starts_with("http://127.0.0.1:10000/devstoreaccount1/policy?sv=2020-08-04&sig=abc%2B&restype=container&comp=list&prefix=layers%2F&marker=m1"), "{list}");
        // The SAS never appears in what is printed.
        assert_eq!(l.to_string(), "http://127.0.0.1:10000/devstoreaccount1/policy/layers/?<sas>");

        let l = loc("https://acct.blob.core.windows.net/policy");
        assert!(l.is_prefix);
        assert_eq!(l.status_name(None), "tagwarden-status.json");

        // A cluster set.
        let l = loc("https://acct.blob.core.windows.net/policy/clusters/*/");
        assert!(l.is_set && l.is_prefix);
        assert_eq!(l.name, "clusters/");
        assert_eq!(l.status_name(Some("c-1")), "clusters/c-1/tagwarden-status.json");
        assert_eq!(l.to_string(), "https://acct.blob.core.windows.net/policy/clusters/*/");
        let e = "https://acct.blob.core.windows.net/policy/clusters*/"
            .parse::<BlobLocation>()
            .expect_err("not a set")
            .to_string();
        assert!(e.contains("PREFIX/*/"), "{e}");
        for bad in [
            "policy.yaml",
            "s3://b/k",
            "https://acct.blob.core.windows.net/",
            "http://127.0.0.1:10000/devstoreaccount1",
        ] {
            let e = bad.parse::<BlobLocation>().expect_err(bad).to_string();
            assert!(e.contains("CONTAINER"), "{e}");
        }
    }
}
