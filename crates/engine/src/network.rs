//! How the cloud clients reach the cloud from inside a cluster: through the cluster-wide proxy
//! (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`, as OpenShift's `Proxy` object publishes them), and
//! trusting an extra CA bundle as well as the built-in roots (`TAGWARDEN_CA_BUNDLE`, e.g. the
//! ConfigMap OpenShift's network operator injects with `config.openshift.io/inject-trusted-cabundle`).
//!
//! Both HTTP stacks (the AWS SDK's hyper client, and reqwest for Azure) read these settings; this
//! module only reads and checks them once, so that a bad bundle is one clear error naming the
//! setting, and a failed connection can say which proxy it went through.

use std::path::PathBuf;

/// The path of a PEM bundle of extra CA certificates to trust, beside the built-in roots.
pub const CA_BUNDLE_ENV: &str = "TAGWARDEN_CA_BUNDLE";

#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("{CA_BUNDLE_ENV}={path}: cannot read the CA bundle ({source}); mount the trusted CA ConfigMap there or unset {CA_BUNDLE_ENV}")]
    Unreadable { path: PathBuf, source: std::io::Error },
    #[error("{CA_BUNDLE_ENV}={path}: no usable PEM certificate in it (expected -----BEGIN CERTIFICATE----- blocks); point it at the ca-bundle.crt key of the trusted CA ConfigMap")]
    NoCertificate { path: PathBuf },
    #[error("TLS setup with {CA_BUNDLE_ENV}: {0}")]
    Tls(String),
}

/// The extra CA bundle `TAGWARDEN_CA_BUNDLE` names, as PEM holding only certificates a TLS stack
/// can use as trust anchors. A cluster's injected bundle is the whole system store plus its own
/// CAs; one certificate no anchor can be made of is skipped (and counted), not fatal, because the
/// SDK's TLS setup would otherwise panic on it.
pub fn extra_ca_bundle() -> Result<Option<CaBundle>, NetworkError> {
    use base64::Engine as _;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;

    let Some(path) = std::env::var_os(CA_BUNDLE_ENV).filter(|p| !p.is_empty()).map(PathBuf::from) else {
        return Ok(None);
    };
    let bytes = std::fs::read(&path).map_err(|source| NetworkError::Unreadable { path: path.clone(), source })?;
    let mut bundle = CaBundle { pem: Vec::new(), certificates: 0, skipped: 0 };
    let mut anchors = rustls::RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(&bytes) {
        match der {
            Ok(der) if anchors.add(der.clone()).is_ok() => {
                let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
                bundle.pem.extend_from_slice(b"-----BEGIN CERTIFICATE-----\n");
                for line in b64.as_bytes().chunks(64) {
                    bundle.pem.extend_from_slice(line);
                    bundle.pem.push(b'\n');
                }
                bundle.pem.extend_from_slice(b"-----END CERTIFICATE-----\n");
                bundle.certificates += 1;
            }
            _ => bundle.skipped += 1,
        }
    }
    if bundle.certificates == 0 {
        return Err(NetworkError::NoCertificate { path });
    }
    if bundle.skipped > 0 {
        tracing::warn!(bundle = %path.display(), skipped = bundle.skipped, trusted = bundle.certificates, "certificates in the CA bundle that cannot be trust anchors were skipped");
    }
    Ok(Some(bundle))
}

/// Extra trust anchors, PEM-encoded.
#[derive(Debug, Clone)]
pub struct CaBundle {
    pub pem: Vec<u8>,
    pub certificates: usize,
    pub skipped: usize,
}

/// The proxy setting a request to `url` goes through, as `NAME=value` for messages (any
/// `user:password@` shown as `***@`), or `None` when it goes direct. The HTTP stacks decide for
/// themselves; this names it with their rules (hyper-util's matcher, which reqwest and the AWS
/// SDK both use): the upper-case name before the lower-case one, a set-but-empty one meaning
/// none, and the `NO_PROXY` forms `*`, a host, a domain suffix (`.example.com` or
/// `example.com`), an IP address, a CIDR.
pub fn proxy_for(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    let first_set = |names: [&'static str; 2]| names.into_iter().find_map(|n| std::env::var(n).ok().map(|v| (n, v)));
    let names = if scheme == "https" { ["HTTPS_PROXY", "https_proxy"] } else { ["HTTP_PROXY", "http_proxy"] };
    let (name, value) = first_set(names).or_else(|| first_set(["ALL_PROXY", "all_proxy"]))?;
    if value.is_empty() {
        return None;
    }
    let no_proxy = first_set(["NO_PROXY", "no_proxy"]).map(|(_, v)| v).unwrap_or_default();
    (!bypassed(host, &no_proxy)).then(|| format!("{name}={}", without_userinfo(&value)))
}

/// `http://user:password@proxy:3128` as `http://***@proxy:3128`: a proxy's credentials never
/// reach a log, a ConfigMap or an Event.
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").map_or(("", url), |(s, r)| (s, r));
    let (authority, path) = rest.split_once('/').map_or((rest, None), |(a, p)| (a, Some(p)));
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_string(),
    };
    let prefix = if scheme.is_empty() { String::new() } else { format!("{scheme}://") };
    match path {
        Some(p) => format!("{prefix}{authority}/{p}"),
        None => format!("{prefix}{authority}"),
    }
}

fn bypassed(host: &str, no_proxy: &str) -> bool {
    let host = host.to_ascii_lowercase();
    let ip: Option<std::net::IpAddr> = host.parse().ok();
    no_proxy.split(',').map(str::trim).filter(|r| !r.is_empty()).any(|rule| {
        let rule = rule.to_ascii_lowercase();
        if rule == "*" {
            return true;
        }
        // OpenShift's `status.noProxy` lists the service, cluster and machine networks as CIDRs.
        if let (Some(ip), Some((net, bits))) = (ip, rule.split_once('/')) {
            return in_network(ip, net, bits);
        }
        let domain = rule.trim_start_matches('.');
        host == domain || host.ends_with(&format!(".{domain}"))
    })
}

fn in_network(ip: std::net::IpAddr, net: &str, bits: &str) -> bool {
    use std::net::IpAddr;
    let (Ok(net), Ok(bits)) = (net.parse::<IpAddr>(), bits.parse::<u32>()) else { return false };
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::{bypassed, without_userinfo};

    #[test]
    fn proxy_credentials_are_never_shown() {
        assert_eq!(without_userinfo("http://alice:s3cret@proxy.corp:3128"), "http://***@proxy.corp:3128");
        assert_eq!(without_userinfo("http://proxy.corp:3128/"), "http://proxy.corp:3128/");
        assert_eq!(without_userinfo("alice:pw@proxy:8080"), "***@proxy:8080");
    }

    #[test]
    fn no_proxy_rules_match_hosts_domains_and_star() {
        let rules = ".cluster.local, svc,172.30.0.1,example.com";
        assert!(bypassed("kubernetes.default.svc", rules));
        assert!(bypassed("api.cluster.local", rules));
        assert!(bypassed("172.30.0.1", rules));
        assert!(bypassed("s3.example.com", rules));
        assert!(bypassed("EXAMPLE.com", rules));
        assert!(!bypassed("s3.eu-west-1.amazonaws.com", rules));
        assert!(!bypassed("notexample.com", rules));
        assert!(bypassed("anything", "*"));
        let openshift = "172.30.0.0/16,10.128.0.0/14,10.0.0.0/16,.cluster.local,.svc,api-int.c.example.com,fd02::/112";
        assert!(bypassed("172.30.12.1", openshift));
        assert!(bypassed("10.131.255.1", openshift));
        assert!(!bypassed("10.132.0.1", openshift));
        assert!(bypassed("fd02::1", openshift));
        assert!(!bypassed("52.95.110.1", openshift));
        assert!(!bypassed("s3.eu-west-1.amazonaws.com", openshift));
        assert!(!bypassed("anything", ""));
    }
}
