//! The fake Google Cloud APIs driven through Google's official Rust clients (the ones crates/gcp
//! calls them with), pointed at the fake with anonymous credentials; the Cloud Storage bucket
//! metadata, which no client crate covers here, over plain HTTP; and the real
//! gcp-storage-emulator sidecar.

use google_cloud_auth::credentials::{anonymous, Credentials};
use google_cloud_lro::Poller;
use serde_json::json;
use tagwarden_testkit::gcp::http::request_json;
use tagwarden_testkit::gcp::{emulator, FakeGcp};

/// The clients were built without their default aws-lc-rs provider: the process default is the
/// workspace's ring (installing it twice is harmless, hence the ignored result).
fn setup() -> (FakeGcp, Credentials) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    (FakeGcp::start(), anonymous::Builder::new().build())
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[tokio::test]
async fn compute_get_set_labels_and_a_stale_fingerprint() {
    use google_cloud_compute_v1::client::{Instances, ZoneOperations};
    use google_cloud_compute_v1::model::InstancesSetLabelsRequest;
    let (fake, creds) = setup();
    let full = fake.add_instance("p1", "us-central1-a", "vm-1", &[("team", "core")]);
    let client =
        Instances::builder().with_endpoint(&fake.endpoint).with_credentials(creds).build().await.expect("client");

    let vm = client.get().set_project("p1").set_zone("us-central1-a").set_instance("vm-1").send().await.expect("get");
    assert_eq!(vm.labels.get("team").map(String::as_str), Some("core"));
    assert_eq!(vm.name.as_deref(), Some("vm-1"));
    let fingerprint = vm.label_fingerprint.clone().expect("labelFingerprint");

    let body = InstancesSetLabelsRequest::new()
        .set_label_fingerprint(fingerprint.clone())
        .set_labels(labels(&[("owner", "ops"), ("team", "core")]));
    let set =
        client.set_labels().set_project("p1").set_zone("us-central1-a").set_instance("vm-1").set_body(body.clone());
    let op = set.clone().send().await.expect("setLabels");
    assert_eq!(op.status, Some(google_cloud_compute_v1::model::operation::Status::Done));
    assert!(op.target_link.as_deref().unwrap_or_default().ends_with("/projects/p1/zones/us-central1-a/instances/vm-1"));
    // The operation is there to get, through the zone operations client.
    let ops = ZoneOperations::builder()
        .with_endpoint(&fake.endpoint)
        .with_credentials(anonymous::Builder::new().build())
        .build()
        .await
        .expect("client");
    let got = ops
        .get()
        .set_project("p1")
        .set_zone("us-central1-a")
        .set_operation(op.name.clone().expect("operation name"))
        .send()
        .await
        .expect("zoneOperations.get");
    assert_eq!((got.id, got.kind.as_deref()), (op.id, Some("compute#operation")));
    let want: Vec<(String, String)> = labels(&[("owner", "ops"), ("team", "core")]);
    assert_eq!(fake.labels(&full).expect("exists").into_iter().collect::<Vec<_>>(), want);

    // The old fingerprint is stale now: 412 in Compute's words.
    let err = set.send().await.expect_err("a stale fingerprint is refused");
    assert_eq!(err.http_status_code(), Some(412), "{err:?}");
    assert!(
        format!("{err:?}").contains("Labels fingerprint either invalid or resource labels have changed"),
        "{err:?}"
    );

    // The poller path: a done operation ends the poll at once.
    let vm = client.get().set_project("p1").set_zone("us-central1-a").set_instance("vm-1").send().await.expect("get");
    let body = InstancesSetLabelsRequest::new()
        .set_label_fingerprint(vm.label_fingerprint.expect("fingerprint"))
        .set_labels(labels(&[("team", "edge")]));
    let op = client
        .set_labels()
        .set_project("p1")
        .set_zone("us-central1-a")
        .set_instance("vm-1")
        .set_body(body)
        .poller()
        .until_done()
        .await
        .expect("until_done");
    assert_eq!(op.operation_type.as_deref(), Some("setLabels"));
    assert_eq!(fake.labels(&full).expect("exists").len(), 1, "setLabels replaces the whole map");
    let c = fake.counters();
    assert_eq!((c.reads, c.writes), (2, 3), "{c:?}");
}

#[tokio::test]
async fn compute_race_and_the_other_resource_types() {
    use google_cloud_compute_v1::client::{Disks, GlobalAddresses, Images};
    use google_cloud_compute_v1::model::{GlobalSetLabelsRequest, ZoneSetLabelsRequest};
    let (fake, creds) = setup();
    let disk = fake.add_disk("p1", "europe-west1-b", "d1", &[]);
    fake.add_image("p1", "img", &[("a", "b")]);
    fake.add_global_address("p1", "ga", &[]);
    let disks =
        Disks::builder().with_endpoint(&fake.endpoint).with_credentials(creds.clone()).build().await.expect("client");
    let d = disks.get().set_project("p1").set_zone("europe-west1-b").set_disk("d1").send().await.expect("get disk");
    assert!(d.labels.is_empty());
    // An unlabelled resource's fingerprint is the one Compute gives: 42WmSpB8rSM=.
    assert_eq!(fake.fingerprint(&disk).as_deref(), Some("42WmSpB8rSM="));

    fake.race_next_write(&disk, &[("someone", "else")]);
    let body = ZoneSetLabelsRequest::new()
        .set_label_fingerprint(d.label_fingerprint.expect("fingerprint"))
        .set_labels(labels(&[("owner", "ops")]));
    let err = disks
        .set_labels()
        .set_project("p1")
        .set_zone("europe-west1-b")
        .set_resource("d1")
        .set_body(body)
        .send()
        .await
        .expect_err("the other writer got there first");
    assert_eq!(err.http_status_code(), Some(412));
    assert_eq!(fake.labels(&disk).expect("exists").get("someone").map(String::as_str), Some("else"));

    let images =
        Images::builder().with_endpoint(&fake.endpoint).with_credentials(creds.clone()).build().await.expect("client");
    let img = images.get().set_project("p1").set_image("img").send().await.expect("get image");
    let body = GlobalSetLabelsRequest::new()
        .set_label_fingerprint(img.label_fingerprint.expect("fingerprint"))
        .set_labels(labels(&[("a", "c")]));
    images.set_labels().set_project("p1").set_resource("img").set_body(body).send().await.expect("image setLabels");
    let ga = GlobalAddresses::builder()
        .with_endpoint(&fake.endpoint)
        .with_credentials(creds.clone())
        .build()
        .await
        .expect("client");
    let a = ga.get().set_project("p1").set_address("ga").send().await.expect("get global address");
    assert_eq!(a.kind.as_deref(), Some("compute#address"));

    // Regional and global forwarding rules and regional addresses: get, then setLabels.
    use google_cloud_compute_v1::client::{Addresses, ForwardingRules, GlobalForwardingRules};
    use google_cloud_compute_v1::model::RegionSetLabelsRequest;
    let fr = fake.add_forwarding_rule("p1", "us-east1", "fr", &[]);
    let gfr = fake.add_global_forwarding_rule("p1", "gfr", &[]);
    let addr = fake.add_address("p1", "us-east1", "ip", &[]);
    let rules = ForwardingRules::builder()
        .with_endpoint(&fake.endpoint)
        .with_credentials(creds.clone())
        .build()
        .await
        .expect("client");
    let r =
        rules.get().set_project("p1").set_region("us-east1").set_forwarding_rule("fr").send().await.expect("get rule");
    let body = RegionSetLabelsRequest::new()
        .set_label_fingerprint(r.label_fingerprint.expect("fp"))
        .set_labels(labels(&[("o", "1")]));
    rules
        .set_labels()
        .set_project("p1")
        .set_region("us-east1")
        .set_resource("fr")
        .set_body(body)
        .send()
        .await
        .expect("rule setLabels");
    let global = GlobalForwardingRules::builder()
        .with_endpoint(&fake.endpoint)
        .with_credentials(creds.clone())
        .build()
        .await
        .expect("client");
    let r = global.get().set_project("p1").set_forwarding_rule("gfr").send().await.expect("get global rule");
    let body = GlobalSetLabelsRequest::new()
        .set_label_fingerprint(r.label_fingerprint.expect("fp"))
        .set_labels(labels(&[("o", "2")]));
    global
        .set_labels()
        .set_project("p1")
        .set_resource("gfr")
        .set_body(body)
        .send()
        .await
        .expect("global rule setLabels");
    let addresses = Addresses::builder()
        .with_endpoint(&fake.endpoint)
        .with_credentials(creds.clone())
        .build()
        .await
        .expect("client");
    let a =
        addresses.get().set_project("p1").set_region("us-east1").set_address("ip").send().await.expect("get address");
    let body = RegionSetLabelsRequest::new()
        .set_label_fingerprint(a.label_fingerprint.expect("fp"))
        .set_labels(labels(&[("o", "3")]));
    addresses
        .set_labels()
        .set_project("p1")
        .set_region("us-east1")
        .set_resource("ip")
        .set_body(body)
        .send()
        .await
        .expect("address setLabels");
    let got: Vec<Option<String>> =
        [&fr, &gfr, &addr].iter().map(|n| fake.labels(n).and_then(|l| l.get("o").cloned())).collect();
    assert_eq!(got, vec![Some("1".into()), Some("2".into()), Some("3".into())]);

    // The unlabelable types answer a GET without labels.
    fake.add_network("p1", "default");
    let (status, net) =
        request_json("GET", &format!("{}/compute/v1/projects/p1/global/networks/default", fake.endpoint), None).await;
    assert_eq!(status, 200);
    assert!(net.get("labels").is_none() && net.get("labelFingerprint").is_none(), "{net}");
    let calls = fake.calls();
    assert!(calls.iter().any(|c| c.method == "POST" && c.path.ends_with("/global/images/img/setLabels")), "{calls:?}");
}

#[tokio::test]
async fn asset_search_by_scope_label_type_and_page() {
    use google_cloud_asset_v1::client::AssetService;
    let (fake, creds) = setup();
    fake.add_project("p1", 111, &["folders/7", "organizations/9"]);
    fake.add_project("p2", 222, &["organizations/9"]);
    for i in 0..5 {
        fake.add_instance(
            "p1",
            "us-central1-a",
            &format!("vm-{i}"),
            &[("env", if i % 2 == 0 { "prod" } else { "team-prod" })],
        );
    }
    fake.add_bucket("p2", "b1", "US", &[("env", "prod")]);
    fake.add_managed_zone("p2", "z1", "example.com.", &[]);
    fake.add_subnetwork("p1", "us-central1", "s1");
    let client =
        AssetService::builder().with_endpoint(&fake.endpoint).with_credentials(creds).build().await.expect("client");
    let search = |scope: &str, query: &str| client.search_all_resources().set_scope(scope).set_query(query);

    // `=` is exact: `team-prod` is not `prod`; `:` matches the word.
    let exact = search("organizations/9", "labels.env=prod").send().await.expect("search");
    assert_eq!(exact.results.len(), 4, "{exact:?}");
    let has = search("organizations/9", "labels.env:prod").send().await.expect("search");
    assert_eq!(has.results.len(), 6);
    let folder =
        search("folders/7", "").set_asset_types(["compute.googleapis.com/Instance"]).send().await.expect("search");
    assert_eq!(folder.results.len(), 5);
    let r = &folder.results[0];
    assert_eq!(r.name, "//compute.googleapis.com/projects/p1/zones/us-central1-a/instances/vm-0");
    assert_eq!((r.project.as_str(), r.organization.as_str()), ("projects/111", "organizations/9"));
    assert_eq!(r.folders, vec!["folders/7".to_string()]);
    assert_eq!(r.location, "us-central1-a");

    // Paged: 2 + 2 + 1 with the tokens the fake gives.
    let (mut token, mut seen) = (String::new(), 0);
    loop {
        let page =
            search("projects/p1", "labels.env:*").set_page_size(2).set_page_token(token).send().await.expect("page");
        seen += page.results.len();
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen, 5);
    let err = search("folders/404", "").send().await.expect_err("an unknown scope");
    assert_eq!(err.http_status_code(), Some(403));
    let subnet = search("projects/111", "").set_asset_types([".*Subnetwork"]).send().await.expect("search");
    assert!(subnet.results[0].labels.is_empty());
    // Tags bound to a resource come back as `tags` and `effectiveTags`.
    let prod = fake.add_tag_value("9/env/prod");
    fake.bind_tag("//storage.googleapis.com/b1", &prod);
    let tagged =
        search("projects/p2", "").set_asset_types(["storage.googleapis.com/Bucket"]).send().await.expect("search");
    let tag = &tagged.results[0].tags[0];
    assert_eq!((tag.tag_value.as_deref(), tag.tag_value_id.as_deref()), (Some("9/env/prod"), Some(prod.as_str())));
    assert_eq!(tagged.results[0].effective_tags[0].attached_resource.as_deref(), Some("//storage.googleapis.com/b1"));
    fake.search_default_page(3);
    let first = search("projects/p1", "").send().await.expect("search");
    assert_eq!(first.results.len(), 3);
    assert!(!first.next_page_token.is_empty());
    assert_eq!(fake.counters().lists, 10);
}

#[tokio::test]
async fn dns_zone_patch_replaces_the_labels() {
    use google_cloud_dns_v1::client::ManagedZones;
    use google_cloud_dns_v1::model::ManagedZone;
    let (fake, creds) = setup();
    let full = fake.add_managed_zone("p1", "z1", "example.com.", &[("a", "1")]);
    let client =
        ManagedZones::builder().with_endpoint(&fake.endpoint).with_credentials(creds).build().await.expect("client");
    let zone = client.get().set_project("p1").set_managed_zone("z1").send().await.expect("get zone");
    assert_eq!(zone.dns_name.as_deref(), Some("example.com."));
    let op = client
        .patch()
        .set_project("p1")
        .set_managed_zone("z1")
        .set_body(ManagedZone::new().set_labels(labels(&[("b", "2")])))
        .send()
        .await
        .expect("patch zone");
    assert_eq!(op.status, Some(google_cloud_dns_v1::model::operation::Status::Done));
    let new = op.zone_context.and_then(|c| c.new_value).expect("zoneContext.newValue");
    assert_eq!(new.labels.get("b").map(String::as_str), Some("2"));
    assert_eq!(fake.labels(&full).expect("exists").len(), 1);
}

#[tokio::test]
async fn tag_values_and_bindings() {
    use google_cloud_resourcemanager_v3::client::{TagBindings, TagValues};
    use google_cloud_resourcemanager_v3::model::TagBinding;
    let (fake, creds) = setup();
    let vm = fake.add_instance("p1", "us-central1-a", "vm-1", &[]);
    let prod = fake.add_tag_value("9/env/prod");
    let values = TagValues::builder()
        .with_endpoint(&fake.endpoint)
        .with_credentials(creds.clone())
        .build()
        .await
        .expect("client");
    let v = values.get_namespaced_tag_value().set_name("9/env/prod").send().await.expect("namespaced");
    assert_eq!(v.name, prod);
    let err = values.get_namespaced_tag_value().set_name("9/env/nope").send().await.expect_err("no such value");
    assert_eq!(err.http_status_code(), Some(403));

    let bindings =
        TagBindings::builder().with_endpoint(&fake.endpoint).with_credentials(creds).build().await.expect("client");
    // A compute resource's binding names it by numeric id.
    let parent =
        format!("//compute.googleapis.com/projects/p1/zones/us-central1-a/instances/{}", fake.id(&vm).expect("id"));
    let b = bindings
        .create_tag_binding()
        .set_tag_binding(TagBinding::new().set_parent(&parent).set_tag_value(&prod))
        .poller()
        .until_done()
        .await
        .expect("create binding");
    assert_eq!(b.tag_value_namespaced_name, "9/env/prod");
    assert_eq!(fake.tag_bindings(&vm), vec![prod.clone()]);
    let listed = bindings.list_tag_bindings().set_parent(&parent).send().await.expect("list");
    assert_eq!(listed.tag_bindings.len(), 1);
    assert!(listed.tag_bindings[0].name.starts_with("tagBindings/%2F%2Fcompute.googleapis.com%2Fprojects%2Fp1"));
}

#[tokio::test]
async fn bucket_labels_patch_over_http() {
    let (fake, _) = setup();
    let full = fake.add_bucket("p1", "b1", "us", &[("keep", "1"), ("drop", "2")]);
    let url = format!("{}/storage/v1/b/b1", fake.endpoint);
    let (status, b) = request_json("GET", &url, None).await;
    assert_eq!((status, b["metageneration"].as_str()), (200, Some("1")), "{b}");
    assert_eq!(b["location"], "US");
    let patch = json!({"labels": {"drop": null, "new": "3"}});
    let (status, b) = request_json("PATCH", &format!("{url}?ifMetagenerationMatch=1"), Some(&patch)).await;
    assert_eq!(status, 200, "{b}");
    assert_eq!(b["labels"], json!({"keep": "1", "new": "3"}));
    assert_eq!(b["metageneration"], "2");
    let (status, e) = request_json("PATCH", &format!("{url}?ifMetagenerationMatch=1"), Some(&patch)).await;
    assert_eq!(status, 412);
    assert_eq!(e["error"]["errors"][0]["reason"], "conditionNotMet");

    fake.race_next_write(&full, &[("other", "x")]);
    let (status, _) = request_json("PATCH", &format!("{url}?ifMetagenerationMatch=2"), Some(&patch)).await;
    assert_eq!(status, 412, "the other writer moved the metageneration on");
    fake.fail_next("GET", "/storage/v1/b/b1", 503);
    assert_eq!(request_json("GET", &url, None).await.0, 503);
    assert_eq!(request_json("GET", &url, None).await.0, 200);
}

#[tokio::test]
async fn storage_emulator_upload_and_download() {
    let gcs = emulator::gcs_emulator();
    let bucket = gcs.bucket().await;
    gcs.put_object(&bucket, "policies/default.json", br#"{"required":["team"]}"#, "application/json").await;
    let got = gcs.get_object(&bucket, "policies/default.json").await.expect("object exists");
    assert_eq!(got, br#"{"required":["team"]}"#);
    assert_eq!(gcs.get_object(&bucket, "policies/missing.json").await, None);
}
