//! A resource's Resource Manager tags: the tags in effect on it, read, and the policy's bound to
//! it directly, through Resource Manager v3's tag bindings (official client
//! `google-cloud-resourcemanager-v3`).
//!
//! - Read: `ListEffectiveTags` on the resource ("Listing tags attached to resources"): its direct
//!   bindings (`inherited: false`) and those it inherits from its project, folders and
//!   organization. A tag in effect with the policy's value, inherited or not, is what Google
//!   evaluates (IAM conditions, organization policies), so it is not bound again: one call saved
//!   per resource and no second copy of the parent's binding.
//! - Write: `CreateTagBinding` with the value's namespaced name (`tagValueNamespacedName`,
//!   `<parentID>/<key>/<value>`): tagwarden binds existing values and never creates a key or a
//!   value, as OpenShift does. "Exactly one value can be attached to a resource for a given key"
//!   ("Creating and managing tags"): a direct binding of another value is refused, so a wrong
//!   direct value is unbound first (`DeleteTagBinding`) and bound again on failure. A direct
//!   binding overrides an inherited value of the same key ("the lower hierarchy tag value will
//!   overwrite the higher hierarchy tag value of the same tag key", Cloud Asset Inventory
//!   `EffectiveTagDetails`). Both calls are long-running operations, awaited.
//! - Where: a zonal or regional resource's bindings go to its location's endpoint
//!   (`https://LOCATION-cloudresourcemanager.googleapis.com`: "If you are attaching the tag to a
//!   regional resource, such as a Compute Engine instance, use …"), a global one's to the global
//!   endpoint. A Compute resource is named by its numeric id
//!   (`//compute.googleapis.com/projects/P/zones/Z/instances/ID`, the Terraform provider's
//!   `google_tags_location_tag_binding` example); tagwarden names the project by id, which the
//!   service takes as well (inferred from Google's Cloud Foundation Fabric falling back to it). A
//!   bucket is `//storage.googleapis.com/projects/_/buckets/NAME` at its location's endpoint
//!   (Cloud Storage, "Tags and labels").
//! - Names: an effective tag's `namespacedTagKey` is `<org id or project id>/<key>` (a recorded
//!   `gcloud resource-manager tags bindings list --effective`: `my-project/my-tag`, beside
//!   `tagKeyParentName: projects/812343123418`), the form OpenShift's `parentID` takes.

use google_cloud_lro::Poller;
use google_cloud_resourcemanager_v3::model::TagBinding;
use tagwarden_core::calls::CallCounter;
use tagwarden_core::gcp::TagRef;

/// Whether a bind failed because the binding is already there (`ALREADY_EXISTS`): what was wanted
/// holds.
pub fn already(e: &CloudError) -> bool {
    e.code == "AlreadyExists"
}
use tagwarden_engine::cloud_error::{CloudError, ErrorClass};

use crate::clients::{encode_segment, Clients, RESOURCE_MANAGER as GLOBAL_ENDPOINT};
use crate::error::from_gax;
const OP_LIST: &str = "tags:ListEffectiveTags";
const OP_BIND: &str = "tags:CreateTagBinding";
const OP_UNBIND: &str = "tags:DeleteTagBinding";
const OP_VALUE: &str = "tags:GetNamespacedTagValue";

/// Where a resource's tags are bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingParent {
    /// The full resource name a `TagBinding`'s `parent` takes.
    pub parent: String,
    /// The Resource Manager endpoint its bindings go to.
    pub endpoint: String,
}

/// One tag in effect on a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    /// The key's namespaced name, `<parentID>/<key>`: the policy's entry key.
    pub key: String,
    /// The value's short name.
    pub value: String,
    /// `tagValues/N`.
    pub tag_value: String,
    pub inherited: bool,
}

/// The endpoint for a resource at `location` (`None`: global), given the configured one: the
/// location's own when it is Google's, the configured one otherwise (a test server, Private
/// Service Connect).
pub fn endpoint_for(configured: &str, location: Option<&str>) -> String {
    match location {
        Some(loc) if configured == GLOBAL_ENDPOINT => {
            format!("https://{}-cloudresourcemanager.googleapis.com", loc.to_ascii_lowercase())
        }
        _ => configured.to_string(),
    }
}

/// A binding's name, `tagBindings/{parent, URL-encoded}/tagValues/{id}` (Resource Manager v3
/// `TagBinding.name`).
pub fn binding_name(parent: &str, tag_value: &str) -> String {
    let id = tag_value.trim_start_matches("tagValues/");
    format!("tagBindings/{}/tagValues/{id}", encode_segment(parent))
}

impl Clients {
    async fn tag_client(
        &self,
        name: &str,
        at: &BindingParent,
        op: &'static str,
    ) -> Result<google_cloud_resourcemanager_v3::client::TagBindings, CloudError> {
        self.tag_bindings(&at.endpoint)
            .await
            .map_err(|e| CloudError::gcp(op, name, None, "Client", &e.to_string(), ErrorClass::Fatal))
    }

    /// The tags in effect on the resource `name`, every page.
    pub async fn effective_tags(
        &self,
        name: &str,
        at: &BindingParent,
        calls: &CallCounter,
    ) -> Result<Vec<Effective>, CloudError> {
        let client = self.tag_client(name, at, OP_LIST).await?;
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            calls.record(OP_LIST);
            let page = client
                .list_effective_tags()
                .set_parent(&at.parent)
                .set_page_token(&token)
                .send()
                .await
                .map_err(|e| from_gax(OP_LIST, name, &e))?;
            out.extend(page.effective_tags.into_iter().map(|t| Effective {
                value: t.namespaced_tag_value.rsplit('/').next().unwrap_or_default().to_string(),
                key: t.namespaced_tag_key,
                tag_value: t.tag_value,
                inherited: t.inherited,
            }));
            if page.next_page_token.is_empty() {
                return Ok(out);
            }
            token = page.next_page_token;
        }
    }

    /// The existing value `tag` names, `tagValues/N` (`GetNamespacedTagValue`): a value that does
    /// not exist, or that the function may not see, is refused here (403), before anything is
    /// unbound for it.
    pub async fn tag_value(&self, name: &str, tag: &TagRef, calls: &CallCounter) -> Result<String, CloudError> {
        let client = self
            .tag_values()
            .await
            .map_err(|e| CloudError::gcp(OP_VALUE, name, None, "Client", &e.to_string(), ErrorClass::Fatal))?;
        calls.record(OP_VALUE);
        let value = client.get_namespaced_tag_value().set_name(tag.namespaced_value()).send().await;
        value.map(|v| v.name).map_err(|e| from_gax(OP_VALUE, name, &e))
    }

    /// Bind an existing value to the resource `name`: `value` is its namespaced name
    /// (`<parentID>/<key>/<value>`) or its resource name (`tagValues/N`).
    pub async fn bind(
        &self,
        name: &str,
        at: &BindingParent,
        value: &str,
        calls: &CallCounter,
    ) -> Result<(), CloudError> {
        let client = self.tag_client(name, at, OP_BIND).await?;
        calls.record(OP_BIND);
        let binding = TagBinding::new().set_parent(&at.parent);
        let binding = if value.starts_with("tagValues/") {
            binding.set_tag_value(value)
        } else {
            binding.set_tag_value_namespaced_name(value)
        };
        client
            .create_tag_binding()
            .set_tag_binding(binding)
            .poller()
            .until_done()
            .await
            .map(|_| ())
            .map_err(|e| from_gax(OP_BIND, name, &e))
    }

    /// Remove the direct binding of `tag_value` (`tagValues/N`) from the resource `name`.
    pub async fn unbind(
        &self,
        name: &str,
        at: &BindingParent,
        tag_value: &str,
        calls: &CallCounter,
    ) -> Result<(), CloudError> {
        let client = self.tag_client(name, at, OP_UNBIND).await?;
        calls.record(OP_UNBIND);
        client
            .delete_tag_binding()
            .set_name(binding_name(&at.parent, tag_value))
            .poller()
            .until_done()
            .await
            .map_err(|e| from_gax(OP_UNBIND, name, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_go_to_the_resources_location_and_name_it_encoded() {
        assert_eq!(
            endpoint_for(GLOBAL_ENDPOINT, Some("us-central1-a")),
            "https://us-central1-a-cloudresourcemanager.googleapis.com"
        );
        assert_eq!(endpoint_for(GLOBAL_ENDPOINT, None), GLOBAL_ENDPOINT);
        assert_eq!(endpoint_for("http://127.0.0.1:9", Some("US")), "http://127.0.0.1:9");
        assert_eq!(
            binding_name("//compute.googleapis.com/projects/p/zones/z/instances/123", "tagValues/456"),
            "tagBindings/%2F%2Fcompute.googleapis.com%2Fprojects%2Fp%2Fzones%2Fz%2Finstances%2F123/tagValues/456"
        );
    }
}
