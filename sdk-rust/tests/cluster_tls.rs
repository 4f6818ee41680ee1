//! `[redis] mode = cluster` over TLS with a private CA, a client certificate
//! (`tls-auth-clients yes`) and an ACL user: the blocking and async clients
//! made from a delayer.conf reach every node, and a file that is missing,
//! unreadable as PEM, or left out says which.

use delayer::Delayer;
use std::path::{Path, PathBuf};
use std::time::Duration;
use testkit::cluster_tls::{TlsCluster, PASSWORD};
use testkit::temp_dir;

fn write_conf(dir: &Path, name: &str, redis_section: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("[delayer]\nlayout = topic\n\n{redis_section}")).expect("conf");
    path
}

/// `redis_section` without the lines whose key starts with one of `keys`.
fn without(redis_section: &str, keys: &[&str]) -> String {
    redis_section.lines().filter(|l| !keys.iter().any(|k| l.starts_with(k))).map(|l| format!("{l}\n")).collect()
}

#[test]
fn blocking_and_async_clients_reach_every_node_with_the_private_ca_and_a_client_certificate() {
    let cluster = TlsCluster::start();
    let dir = temp_dir("cluster-tls-sdk");
    let path = write_conf(&dir, "delayer.conf", &cluster.redis_section());

    let d = Delayer::from_conf(&path).expect("a TLS cluster client");
    let topics: Vec<String> = (0..12).map(|i| format!("tls{i}")).collect();
    for t in &topics {
        d.push(t, "a", Duration::from_secs(600)).expect("push over TLS");
    }
    // (stats() lists the topics of <prefix>topics, which the server keeps:
    // none runs here, so each job is looked up instead.)
    for t in &topics {
        assert_eq!(d.job(t, "a").expect("lookup").state, delayer::inspect::JobState::Scheduled, "{t}");
    }
    assert!(d.remove_in("tls1", "a").expect("remove"));
    // The blocking wait has a connection of its own: TLS and certificates too.
    assert!(d.bpop("tls-empty", Duration::from_millis(200)).expect("bpop").is_none());

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let a = delayer::aio::Delayer::from_conf(&path).expect("an async TLS cluster client");
        a.push("tls2", "async", Duration::from_secs(600)).await.expect("async push over TLS");
        assert_eq!(a.job("tls2", "async").await.expect("async lookup").state, delayer::inspect::JobState::Scheduled);
        assert!(a.bpop("tls-empty", Duration::from_millis(200)).await.expect("async bpop").is_none());
    });

    // Twelve topics over three masters: every node holds some, so the
    // client reached each one (redirections included), not only a seed.
    for &port in cluster.ports() {
        let mut conn = cluster.connection(port).expect("test connection");
        let keys: u64 = redis::cmd("DBSIZE").query(&mut conn).expect("DBSIZE");
        assert!(keys > 0, "node {port} holds no job: the topics did not spread");
    }

    // Without the client certificate the nodes refuse the handshake, and
    // without the CA the client does not trust the nodes: both are errors
    // (not hangs or panics), and neither shows the password.
    for (name, left_out) in
        [("no-client-cert.conf", &["tls_cert_file", "tls_key_file"][..]), ("no-ca.conf", &["tls_ca_file"][..])]
    {
        let path = write_conf(&dir, name, &without(&cluster.redis_section(), left_out));
        let client = Delayer::from_conf(&path).expect("the file is valid");
        let err = client.push("tls3", "refused", Duration::from_secs(600)).expect_err(name).to_string();
        assert!(!err.contains(PASSWORD), "{name}: the password leaked: {err}");
        // "CertificateRequired" from the nodes, "invalid peer certificate" from rustls.
        assert!(err.to_lowercase().contains("certificate"), "{name}: the error says what is wrong: {err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_missing_or_non_pem_tls_file_names_the_key_and_the_file() {
    let dir = temp_dir("cluster-tls-files");
    std::fs::write(dir.join("junk.pem"), "not a certificate\n").expect("junk");
    std::fs::write(
        dir.join("cert-only.pem"),
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2xhdWRl\n-----END CERTIFICATE-----\n",
    )
    .expect("cert-only");
    let base = "[redis]\nmode = cluster\nnodes = 127.0.0.1:1\ntls = yes\n";
    for (extra, want) in [
        ("tls_ca_file = missing.pem\n", "[redis] tls_ca_file: cannot read missing.pem: "),
        ("tls_ca_file = junk.pem\n", "[redis] tls_ca_file: junk.pem: no PEM certificate in it"),
        (
            "tls_cert_file = junk.pem\ntls_key_file = cert-only.pem\n",
            "[redis] tls_cert_file: junk.pem: no PEM certificate in it",
        ),
        (
            "tls_cert_file = cert-only.pem\ntls_key_file = cert-only.pem\n",
            "[redis] tls_key_file: cert-only.pem: no PEM private key in it",
        ),
        ("tls_cert_file = cert-only.pem\n", "[redis] tls_cert_file: needs tls_key_file too"),
    ] {
        let path = write_conf(&dir, "delayer.conf", &format!("{base}{extra}"));
        let err = Delayer::from_conf(&path).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains(want), "{extra:?}: {err:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
