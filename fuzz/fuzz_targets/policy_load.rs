//! `tagwarden::policy::load_one` (Infrastructure JSON/YAML, install-config, tagwarden.yaml, tag
//! maps) and validation for both clouds: a policy or a clear error, never a panic. The first byte
//! picks the document name (its extension can steer format detection).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tagwarden::cloud::Cloud;

const NAMES: [&str; 4] = ["policy.yaml", "policy.json", "10-layer.yml", "policy"];

fuzz_target!(|data: &[u8]| {
    let Some((first, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let name = NAMES[*first as usize % NAMES.len()];
    match tagwarden::policy::load_one(name, text) {
        Ok(policy) => {
            for cloud in [Cloud::Aws, Cloud::Azure] {
                for v in tagwarden::validate::policy(&policy, cloud) {
                    assert!(!v.message.is_empty());
                }
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
