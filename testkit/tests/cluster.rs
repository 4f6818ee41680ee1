//! The Redis Cluster harness itself: six real redis-server processes form a
//! cluster, keys land on all three masters, a master killed with SIGKILL is
//! replaced by its replica with the data written before, and drop leaves no
//! node running.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use testkit::cluster::{Cluster, SLOTS};

/// No process with this pid any more (ours are reaped, so no zombie either).
fn gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

fn listening(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

/// Keys and their masters, until each of the three masters has two.
fn keys_on_every_master(cluster: &Cluster) -> BTreeMap<String, u16> {
    let masters = cluster.masters();
    let mut found = BTreeMap::new();
    let mut i = 0;
    while masters.iter().any(|m| found.values().filter(|&v| v == m).count() < 2) {
        let key = format!("harness:{i}");
        found.insert(key.clone(), cluster.master_for(&key));
        i += 1;
    }
    found
}

fn get(cluster: &Cluster, port: u16, key: &str) -> redis::RedisResult<Option<String>> {
    redis::cmd("GET").arg(key).query(&mut cluster.connection(port))
}

#[test]
fn cluster_forms_keeps_data_through_a_master_kill_and_drop_stops_every_node() {
    let mut cluster = Cluster::start();
    eprintln!("cluster formed in {:?}", cluster.start_time());
    let ports = cluster.ports();
    assert_eq!(ports.len(), 6);
    assert!(ports.iter().all(|&p| p != 6379 && p + 10000 != 16379));
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    let view = cluster.topology();
    let mut covered: Vec<(u16, u16)> =
        view.iter().filter(|n| masters.contains(&n.port)).flat_map(|n| n.slots.clone()).collect();
    covered.sort();
    assert_eq!(covered.first().map(|r| r.0), Some(0));
    assert_eq!(covered.last().map(|r| r.1), Some(SLOTS - 1));
    assert!(covered.windows(2).all(|w| w[0].1 + 1 == w[1].0), "slots not contiguous: {covered:?}");
    let replicas: BTreeMap<u16, u16> =
        masters.iter().map(|&m| (m, cluster.replica_of(m).expect("every master has a replica"))).collect();
    assert!(replicas.values().all(|r| !masters.contains(r)));

    // Write through single-node connections, each key to its master.
    let keys = keys_on_every_master(&cluster);
    let mut owners: Vec<u16> = keys.values().copied().collect();
    owners.sort();
    owners.dedup();
    let mut sorted_masters = masters.clone();
    sorted_masters.sort();
    assert_eq!(owners, sorted_masters);
    for (key, &master) in &keys {
        let mut conn = cluster.connection(master);
        let _: () = redis::cmd("SET").arg(key).arg(format!("value of {key}")).query(&mut conn).expect("SET");
        let acked: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut conn).expect("WAIT");
        assert_eq!(acked, 1, "the replica of {master} did not acknowledge");
        // Any other node answers MOVED to that master.
        let other = replicas[&master];
        let moved = get(&cluster, other, key).expect_err("a replica does not serve the key");
        assert_eq!(moved.redirect_node().map(|(addr, _)| addr.to_string()), Some(format!("127.0.0.1:{master}")));
    }

    let victim = keys.keys().next().expect("a key").clone();
    let old_master = keys[&victim];
    let old_pid = cluster.pids()[ports.iter().position(|&p| p == old_master).expect("ours")];
    let (killed, new) = cluster.kill_master(Some(&victim));
    eprintln!("failover took {:?}", cluster.failover_time());
    assert_eq!(killed, old_master);
    assert_eq!(new, replicas[&killed]);
    assert!(!cluster.is_alive(killed) && gone(old_pid) && !listening(killed));
    assert_eq!(cluster.master_for(&victim), new);
    let mut now: Vec<u16> = cluster.masters();
    now.sort();
    let mut want: Vec<u16> = masters.iter().copied().filter(|&m| m != killed).chain([new]).collect();
    want.sort();
    assert_eq!(now, want);
    for (key, &master) in &keys {
        let at = if master == killed { new } else { master };
        assert_eq!(get(&cluster, at, key).expect("GET"), Some(format!("value of {key}")), "{key} on {at}");
    }
    let mut conn = cluster.connection(new);
    let _: () = redis::cmd("SET").arg(&victim).arg("after").query(&mut conn).expect("the new master takes writes");
    assert_eq!(get(&cluster, new, &victim).expect("GET"), Some("after".to_string()));
    drop(conn);

    // The new master has no replica left: a second kill is refused, not waited on.
    let refused = catch_unwind(AssertUnwindSafe(|| cluster.kill_master(Some(&victim))));
    let message = refused.expect_err("no replica left").downcast::<String>().map(|s| *s).unwrap_or_default();
    assert!(message.contains(&format!("master {new} has no live replica")), "{message}");

    let pids = cluster.pids();
    let dir = cluster.dir().to_path_buf();
    drop(cluster);
    assert!(pids.iter().all(|&pid| gone(pid)), "a node outlived the drop: {pids:?}");
    assert!(ports.iter().all(|&p| !listening(p)));
    assert!(!dir.exists());
}

#[test]
fn password_cluster_fails_over_without_naming_the_key() {
    let mut cluster = Cluster::start_with_password("rust pw:@/");
    let port = cluster.ports()[0];
    let anonymous = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("client");
    let mut anonymous = anonymous.get_connection().expect("connect");
    let refused = redis::cmd("GET").arg("k").query::<Option<String>>(&mut anonymous).expect_err("no password");
    assert!(refused.to_string().contains("NOAUTH"), "{refused}");
    let section = format!("[redis]\nmode = cluster\nnodes = {}\npassword = rust pw:@/\n", cluster.seeds());
    assert_eq!(cluster.redis_section(), section);

    let first = cluster.masters()[0];
    let replica = cluster.replica_of(first).expect("a replica");
    let (killed, new) = cluster.kill_master(None);
    assert_eq!((killed, new), (first, replica));
    let info: String = redis::cmd("INFO").arg("replication").query(&mut cluster.connection(new)).expect("INFO");
    assert!(info.contains("role:master"), "{info}");
    assert!(!cluster.seeds().contains(&format!(":{killed}")));
}
