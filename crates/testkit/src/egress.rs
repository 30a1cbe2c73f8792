//! The way out of a cluster, on loopback: a private CA (as an enterprise proxy or a cluster's
//! trusted bundle has), an HTTP CONNECT proxy that records every tunnel and is the only thing
//! that can resolve the cloud's host names (so a client that bypasses it fails: the names do not
//! exist anywhere else), TLS fronts for plain-HTTP emulators, and a fake of Entra's token
//! endpoint for Workload Identity.
//!
//! Proxy protocol: RFC 9110 §9.3.6 (CONNECT host:port, `200` then a byte tunnel).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A CA made for one test, and leaf certificates it signs.
pub struct Pki {
    params: rcgen::CertificateParams,
    key: rcgen::KeyPair,
    pub ca_pem: String,
}

impl Default for Pki {
    fn default() -> Self {
        Pki::new()
    }
}

impl Pki {
    pub fn new() -> Pki {
        let key = rcgen::KeyPair::generate().expect("CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, "tagwarden test proxy CA");
        let ca_pem = params.self_signed(&key).expect("CA certificate").pem();
        Pki { params, key, ca_pem }
    }

    /// `(certificate PEM, key PEM)` for `names`.
    pub fn leaf(&self, names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("leaf key");
        let params = rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .expect("leaf params");
        let issuer = rcgen::Issuer::new(self.params.clone(), &self.key);
        let cert = params.signed_by(&key, &issuer).expect("leaf certificate");
        (cert.pem(), key.serialize_pem())
    }

    fn acceptor(&self, names: &[&str]) -> tokio_rustls::TlsAcceptor {
        let key = rcgen::KeyPair::generate().expect("leaf key");
        let params = rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .expect("leaf params");
        let issuer = rcgen::Issuer::new(self.params.clone(), &self.key);
        let cert = params.signed_by(&key, &issuer).expect("leaf certificate");
        let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(Arc::new(
            tokio_rustls::rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key.serialize_der().try_into().expect("key DER"))
        .expect("server TLS config");
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    }

    /// Write the CA to a file, as the trusted-CA ConfigMap is mounted.
    pub fn ca_file(&self, name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("tagwarden-{name}-{}-ca.pem", std::process::id()));
        std::fs::write(&path, &self.ca_pem).expect("CA file");
        path
    }
}

/// A CONNECT proxy on loopback. `routes` maps `host:port` as clients ask for it to a loopback port.
pub struct ConnectProxy {
    pub url: String,
    pub tunnels: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    pub async fn start(routes: HashMap<String, u16>) -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy listens");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let tunnels = Arc::new(Mutex::new(Vec::new()));
        let seen = tunnels.clone();
        let routes = Arc::new(routes);
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else { continue };
                let (seen, routes) = (seen.clone(), routes.clone());
                tokio::spawn(async move {
                    let Some(head) = read_head(&mut client).await else { return };
                    let mut words = head.split_whitespace();
                    let (method, target) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
                    seen.lock().expect("tunnels").push(format!("{method} {target}"));
                    let upstream = match routes.get(target) {
                        Some(port) if method == "CONNECT" => TcpStream::connect(("127.0.0.1", *port)).await.ok(),
                        _ => None,
                    };
                    let Some(mut upstream) = upstream else {
                        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n").await;
                        return;
                    };
                    if client.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n").await.is_ok() {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                    }
                });
            }
        });
        ConnectProxy { url, tunnels }
    }

    pub fn tunnels(&self) -> Vec<String> {
        self.tunnels.lock().expect("tunnels").clone()
    }
}

/// TLS in front of a plain-HTTP emulator: decrypts and pipes the bytes to `upstream` (host:port).
/// Returns the port it listens on.
pub async fn tls_front(pki: &Pki, names: &[&str], upstream: String) -> u16 {
    let acceptor = pki.acceptor(names);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("TLS front listens");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Ok(mut plain) = TcpStream::connect(&upstream).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    port
}

/// What a fake Entra token endpoint saw: the form fields of each token request.
pub type TokenRequests = Arc<Mutex<Vec<HashMap<String, String>>>>;

/// A fake of Entra's token endpoint (`POST /{tenant}/oauth2/v2.0/token`, client credentials with
/// a federated assertion; Microsoft identity platform docs, "access token request with a
/// federated credential"), over TLS. An assertion equal to `expired` is refused the way Entra
/// refuses an expired one (`invalid_client`, AADSTS700024); others get an access token that
/// Azurite's `--oauth basic` accepts: a JWT with Storage's audience and an Entra issuer (Azurite
/// checks those and the times, not the signature).
/// Tokens say they last `expires_in` seconds.
pub async fn fake_entra(pki: &Pki, name: &str, tenant: &str, expires_in: u64) -> (u16, TokenRequests) {
    let acceptor = pki.acceptor(&[name]);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("Entra listens");
    let port = listener.local_addr().expect("address").port();
    let seen: TokenRequests = Arc::default();
    let requests = seen.clone();
    let tenant = tenant.to_string();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let (acceptor, seen, tenant) = (acceptor.clone(), seen.clone(), tenant.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Some((head, body)) = read_request(&mut tls).await else { return };
                let path = head.split_whitespace().nth(1).unwrap_or_default().to_string();
                let form: HashMap<String, String> =
                    body.split('&').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (decode(k), decode(v))).collect();
                let expired = form.get("client_assertion").map(String::as_str) == Some("expired");
                seen.lock().expect("requests").push(form);
                let (status, body) = if path != format!("/{tenant}/oauth2/v2.0/token") {
                    ("404 Not Found", r#"{"error":"not_found"}"#.to_string())
                } else if expired {
                    (
                        "400 Bad Request",
                        r#"{"error":"invalid_client","error_description":"AADSTS700024: Client assertion is not within its valid time range. Current time: 2026-11-25T16:00:00Z, assertion valid from 2026-11-24T10:00:00Z, expiry time of assertion 2026-11-24T11:00:00Z.","error_codes":[700024]}"#.to_string(),
                    )
                } else {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map(|d| d.as_secs())
                        .unwrap_or_default();
                    let b64 = |v: &serde_json::Value| {
                        use base64::Engine as _;
                        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
                    };
                    let jwt = format!(
                        "{}.{}.c2ln",
                        b64(&serde_json::json!({"alg": "RS256", "typ": "JWT"})),
                        b64(
                            &serde_json::json!({"aud": "https://storage.azure.com", "iss": format!("https://sts.windows.net/{tenant}/"),
                            "iat": now - 60, "nbf": now - 60, "exp": now + 3600, "tid": tenant, "oid": "00000000-0000-0000-0000-0000000000aa"})
                        )
                    );
                    ("200 OK", serde_json::json!({"token_type": "Bearer", "expires_in": expires_in, "ext_expires_in": expires_in, "access_token": jwt}).to_string())
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, requests)
}

async fn read_head(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.ok()? == 0 || buf.len() > 16 * 1024 {
            return None;
        }
        buf.push(byte[0]);
    }
    String::from_utf8(buf).ok()
}

async fn read_request(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<(String, String)> {
    let head = read_head(stream).await?;
    let length = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.ok()?;
    Some((head, String::from_utf8_lossy(&body).into_owned()))
}

fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 3 <= bytes.len() {
            if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
