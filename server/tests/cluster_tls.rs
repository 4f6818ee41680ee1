//! The server on a Redis Cluster that speaks TLS only, with a private CA,
//! client certificates required (`tls-auth-clients yes`) and an ACL user,
//! all from its delayer.conf: it moves due jobs on every master, and the
//! password never reaches its output.

use delayer::Delayer;
use std::time::Duration;
use testkit::cluster_tls::{TlsCluster, PASSWORD};
use testkit::{temp_dir, DelayerProcess};

const BIN: &str = env!("CARGO_BIN_EXE_delayer");

#[test]
fn the_server_moves_jobs_on_a_tls_cluster_with_a_private_ca_and_a_client_certificate() {
    let cluster = TlsCluster::start();
    let conf = format!("[delayer]\ntimer_interval = 50\nlayout = topic\n\n{}", cluster.redis_section());
    let server = DelayerProcess::start(BIN, &conf);
    assert!(server.wait_for_output(|o| o.contains("layout topic")), "{}", server.output());

    let dir = temp_dir("cluster-tls-server");
    let path = dir.join("delayer.conf");
    std::fs::write(&path, &conf).expect("conf");
    let d = Delayer::from_conf(&path).expect("a TLS cluster client");
    // Twelve topics spread over the three masters; the server must reach
    // each one to move their jobs (the clients only take ready ones).
    let topics: Vec<String> = (0..12).map(|i| format!("due{i}")).collect();
    for t in &topics {
        d.push(t, "j", Duration::from_secs(1)).expect("push");
    }
    for &port in cluster.ports() {
        let mut conn = cluster.connection(port).expect("test connection");
        let keys: Vec<String> = redis::cmd("KEYS").arg("delayer:{due*").query(&mut conn).expect("KEYS");
        assert!(!keys.is_empty(), "node {port}: no topic of the test here, so it proves nothing");
    }
    for t in &topics {
        let job = d.bpop(t, Duration::from_secs(20)).expect("bpop");
        assert_eq!(job.map(|j| j.id), Some("j".into()), "{t}: not moved\n{}", server.output());
    }
    assert!(!server.output().contains(PASSWORD), "password logged: {}", server.output());
    let _ = std::fs::remove_dir_all(dir);
}
