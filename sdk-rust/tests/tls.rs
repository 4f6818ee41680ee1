//! One Redis over TLS that requires client certificates (`tls-auth-clients
//! yes`): the blocking and async clients from a delayer.conf present the
//! `tls_cert_file`/`tls_key_file` certificate and trust `tls_ca_file`, with
//! the key in PKCS#8 or in the older PKCS#1 ("RSA PRIVATE KEY") form that
//! `openssl genrsa` and many PKI tools still write.

use delayer::Delayer;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use testkit::cluster_tls::make_pki;
use testkit::{temp_dir, RedisServer};

#[test]
fn a_client_certificate_gets_in_with_a_pkcs8_or_a_pkcs1_key() {
    let dir = temp_dir("tls-mutual");
    let pki = make_pki(&dir);
    let redis = RedisServer::start_tls_with(&pki.server_cert, &pki.server_key, &pki.ca, &["--tls-auth-clients", "yes"]);
    let pkcs1 = dir.join("client-pkcs1.key");
    let out = Command::new("openssl")
        .args(["rsa", "-traditional", "-in"])
        .arg(&pki.client_key)
        .arg("-out")
        .arg(&pkcs1)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "openssl rsa: {}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&pkcs1).expect("key").contains("BEGIN RSA PRIVATE KEY"));

    let conf = |name: &str, key: Option<&Path>| {
        let mut text =
            format!("[redis]\nurl = rediss://127.0.0.1:{}/0\ntls_ca_file = {}\n", redis.port(), pki.ca.display());
        if let Some(key) = key {
            text.push_str(&format!(
                "tls_cert_file = {}\ntls_key_file = {}\n",
                pki.client_cert.display(),
                key.display()
            ));
        }
        let path = dir.join(name);
        std::fs::write(&path, text).expect("conf");
        path
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    for (name, key) in [("pkcs8.conf", &pki.client_key), ("pkcs1.conf", &pkcs1)] {
        let path = conf(name, Some(key));
        let d = Delayer::from_conf(&path).expect("client");
        d.push("t", name, Duration::from_secs(600)).expect("push with a client certificate");
        assert!(d.remove_in("t", name).expect("remove"), "{name}: the job was written");
        rt.block_on(async {
            let a = delayer::aio::Delayer::from_conf(&path).expect("async client");
            a.push("t", "async", Duration::from_secs(600)).await.expect("async push with a client certificate");
            assert!(a.remove_in("t", "async").await.expect("async remove"), "{name}: the async job was written");
        });
    }
    // Without the certificate the server refuses the handshake: an error
    // that says so, not a hang.
    let err = Delayer::from_conf(conf("none.conf", None)).expect("client").push("t", "x", Duration::ZERO);
    let err = err.expect_err("no client certificate").to_string();
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}
