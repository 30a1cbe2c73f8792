//! Publishing to Azure Blob Storage (a blob, or the cluster's layer of a prefix), conditional on
//! the blob's ETag.

use reqwest::Method;

use super::{PublishError, Published, Store, CLUSTER_LAYER};
use crate::azure::blob_store::{BlobPolicyStore, OP_GET, OP_PUT};
use crate::azure::AzureError;
use crate::cloud::Cloud;

pub struct BlobStore<'a> {
    store: &'a BlobPolicyStore,
}

impl<'a> BlobStore<'a> {
    /// Publish to `store`'s location: its blob, or `10-cluster.yaml` under its prefix.
    pub fn new(store: &'a BlobPolicyStore) -> Self {
        BlobStore { store }
    }

    fn blob(&self) -> String {
        let l = &self.store.source.location;
        if l.is_prefix {
            format!("{}{CLUSTER_LAYER}", l.name)
        } else {
            l.name.clone()
        }
    }

    async fn send(&self, op: &'static str, req: reqwest::RequestBuilder) -> Result<reqwest::Response, PublishError> {
        self.store.source.calls.record(op);
        req.send()
            .await
            .map_err(|e| PublishError::Cloud(AzureError::transport(op, &self.location(), &e.without_url()).to_string()))
    }
}

async fn failure(op: &'static str, target: &str, resp: reqwest::Response) -> PublishError {
    let status = resp.status().as_u16();
    let code = resp.headers().get("x-ms-error-code").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = resp.text().await.unwrap_or_default();
    PublishError::Cloud(AzureError::from_response(op, target, status, code.as_deref(), &body).to_string())
}

impl Store for BlobStore<'_> {
    fn cloud(&self) -> Cloud {
        Cloud::Azure
    }

    fn location(&self) -> String {
        self.store.source.location.display_name(&self.blob())
    }

    fn document_name(&self) -> String {
        let l = &self.store.source.location;
        let blob = self.blob();
        if l.is_prefix {
            blob.strip_prefix(l.name.as_str()).unwrap_or(&blob).to_string()
        } else {
            blob
        }
    }

    async fn others(&self) -> Result<Vec<(String, String)>, PublishError> {
        if !self.store.source.location.is_prefix {
            return Ok(Vec::new());
        }
        match self.store.documents().await {
            Ok(docs) => Ok(docs.into_iter().filter(|(name, _)| name != CLUSTER_LAYER).collect()),
            Err(e) if e.code == "NoPolicyDocuments" => Ok(Vec::new()),
            Err(e) => Err(PublishError::Cloud(e.to_string())),
        }
    }

    async fn read(&self) -> Result<Option<Published>, PublishError> {
        let url = self.store.source.location.blob_url(&self.blob());
        let req = self.store.source.request(Method::GET, url).await.map_err(|e| PublishError::Cloud(e.to_string()))?;
        let resp = self.send(OP_GET, req).await?;
        match resp.status().as_u16() {
            404 => Ok(None),
            200 => {
                let token = resp.headers().get("etag").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                let bytes = resp
                    .bytes()
                    .await
                    .map_err(|e| PublishError::Cloud(format!("{}: {}", self.location(), e.without_url())))?;
                Ok(Some(Published { text: String::from_utf8_lossy(&bytes).into_owned(), token }))
            }
            _ => Err(failure(OP_GET, &self.location(), resp).await),
        }
    }

    async fn write(&self, text: &str, expected: Option<&Published>) -> Result<String, PublishError> {
        let blob = self.blob();
        let url = self.store.source.location.blob_url(&blob);
        let req = self.store.source.request(Method::PUT, url).await.map_err(|e| PublishError::Cloud(e.to_string()))?;
        // Put Blob's conditional headers: `If-Match` replaces only that ETag, `If-None-Match: *`
        // creates only. A lost race is 412 ConditionNotMet, or 409 BlobAlreadyExists.
        let req = match expected {
            Some(p) => req.header("if-match", &p.token),
            None => req.header("if-none-match", "*"),
        };
        let req = req
            .header("x-ms-blob-type", "BlockBlob")
            .header("content-type", super::content_type(&blob))
            .body(text.to_string());
        let resp = self.send(OP_PUT, req).await?;
        match resp.status().as_u16() {
            200..=299 => Ok(resp.headers().get("etag").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()),
            412 | 409 => Err(PublishError::Conflict {
                location: self.location(),
                read: expected.map(|p| p.token.clone()).unwrap_or_else(|| "none".into()),
                found: "a newer blob".into(),
            }),
            _ => Err(failure(OP_PUT, &self.location(), resp).await),
        }
    }
}
