//! The shared cases of `DELAYER_*` variables over a `delayer.conf`
//! (conformance/env_cases.json), run through the Rust reader: the same
//! table the Python and PHP readers' tests run, so the three apply one rule.

use delayer::Layout;
use delayer_protocol::conf::{client_settings, ConfFile};
use serde_json::Value;
use std::ffi::OsString;

#[test]
fn every_shared_case_gives_the_expected_settings_or_error() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../conformance/env_cases.json"))
        .expect("the cases");
    let cases: Value = serde_json::from_str(&text).expect("JSON");
    for case in cases["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let dir = testkit::temp_dir("env-case");
        let fill = |s: &str| s.replace("{dir}", dir.to_str().expect("utf-8"));
        for (file, content) in case["files"].as_object().into_iter().flatten() {
            std::fs::write(dir.join(file), content.as_str().expect("text")).expect("write");
        }
        let vars: Vec<(OsString, OsString)> = case["env"]
            .as_object()
            .expect("env")
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(fill(v.as_str().expect("text")))))
            .collect();
        let file = ConfFile::parse(dir.join("delayer.conf"), case["file"].as_str().expect("file")).expect("parses");
        let got = client_settings(file, vars);
        if let Some(error) = case["error"].as_str() {
            let e = got.expect_err(name).to_string();
            assert!(e.starts_with(&fill(error)), "{name}: {e}");
        } else {
            let (redis, names) = got.unwrap_or_else(|e| panic!("{name}: {e}"));
            let expect = &case["expect"];
            let layout = if names.layout() == Layout::Topic { "topic" } else { "classic" };
            let effective = serde_json::json!({
                "host": redis.host, "port": redis.port, "database": redis.database, "username": redis.username,
                "password": redis.password, "url": redis.url, "prefix": names.prefix(), "layout": layout,
            });
            for (key, want) in expect.as_object().expect("expect") {
                assert_eq!(&effective[key], want, "{name}: {key}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
