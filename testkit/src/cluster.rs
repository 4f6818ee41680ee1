//! A local Redis Cluster for cluster tests: six `redis-server` processes on
//! free loopback ports, three masters with one replica each, joined by
//! `redis-cli --cluster create` and stopped on drop.
//!
//! Each node's cluster bus listens on its port + 10000, so a port is only
//! taken when both are free. Nodes call a peer down after 2 s
//! (`cluster-node-timeout`) and a replica may always take over
//! (`cluster-replica-validity-factor 0`), so after [`Cluster::kill_master`]
//! the replica is promoted within seconds. Persistence is off, and replicas
//! sync at once (`repl-diskless-sync-delay 0`). Only plain connections to
//! single nodes are used (no cluster client), so testkit needs no more redis
//! features. The Python twin (`testkit/cluster.py`) serves the Python and PHP
//! suites.

use crate::{free_port, temp_dir, wait_until};
use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long forming the cluster, or a failover, may take on a slow, loaded machine.
pub const CLUSTER_DEADLINE: Duration = Duration::from_secs(90);

/// `cluster-node-timeout`: how long a silent node has until its peers call it down.
pub const NODE_TIMEOUT_MS: u64 = 2000;

/// The cluster bus listens on the node's port plus this.
pub const BUS_OFFSET: u16 = 10000;

/// Hash slots of a cluster.
pub const SLOTS: u16 = 16384;

/// A loopback port P, not handed out before by this process, such that P and
/// its bus port P + 10000 are both free (and neither is 6379/16379).
pub fn cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port == 6379 || port == 16379 || port > u16::MAX - BUS_OFFSET {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port + BUS_OFFSET)).is_ok() {
            return port;
        }
    }
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct ClusterNode {
    pub id: String,
    pub port: u16,
    pub flags: Vec<String>,
    /// The master's id for a replica, `-` for a master.
    pub master_id: String,
    /// Owned slot ranges, inclusive.
    pub slots: Vec<(u16, u16)>,
}

impl ClusterNode {
    pub fn is_master(&self) -> bool {
        self.flags.iter().any(|f| f == "master")
    }

    /// Down, suspected down, or not joined yet.
    pub fn failing(&self) -> bool {
        self.flags.iter().any(|f| matches!(f.as_str(), "fail" | "fail?" | "handshake" | "noaddr"))
    }

    pub fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(lo, hi)| lo <= slot && slot <= hi)
    }
}

/// `CLUSTER NODES` as a list (slots being imported or migrated, in brackets,
/// are not owned and left out; lines that do not parse too).
pub fn parse_nodes(text: &str) -> Vec<ClusterNode> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 8 {
                return None;
            }
            let addr = fields[1].split('@').next()?;
            let port = addr.rsplit(':').next()?.parse().ok()?;
            let slots = fields[8..]
                .iter()
                .filter(|part| !part.starts_with('['))
                .filter_map(|part| match part.split_once('-') {
                    Some((lo, hi)) => Some((lo.parse().ok()?, hi.parse().ok()?)),
                    None => part.parse().ok().map(|s| (s, s)),
                })
                .collect();
            Some(ClusterNode {
                id: fields[0].to_string(),
                port,
                flags: fields[2].split(',').map(str::to_string).collect(),
                master_id: fields[3].to_string(),
                slots,
            })
        })
        .collect()
}

struct Node {
    port: u16,
    pid: u32,
    child: Option<Child>,
}

/// Three masters and three replicas on loopback.
pub struct Cluster {
    nodes: Vec<Node>,
    dir: PathBuf,
    password: Option<String>,
    start_time: Duration,
    failover_time: Duration,
}

impl Cluster {
    /// Starts six nodes, creates the cluster and waits until every node
    /// reports `cluster_state:ok` with all slots served, six nodes known,
    /// three masters each with one replica, and every replica in sync.
    pub fn start() -> Cluster {
        Cluster::start_inner(None)
    }

    /// As [`Cluster::start`], with `requirepass` and `masterauth` on every node.
    pub fn start_with_password(password: &str) -> Cluster {
        Cluster::start_inner(Some(password.to_string()))
    }

    fn start_inner(password: Option<String>) -> Cluster {
        let began = Instant::now();
        // Built first and filled in: a panic on the way drops it, which kills what started.
        let mut cluster = Cluster {
            nodes: Vec::new(),
            dir: temp_dir("cluster"),
            password,
            start_time: Duration::ZERO,
            failover_time: Duration::ZERO,
        };
        for _ in 0..6 {
            let node = cluster.spawn_node();
            cluster.nodes.push(node);
        }
        cluster.create();
        cluster.wait_formed();
        cluster.start_time = began.elapsed();
        cluster
    }

    /// Starts one node on a fresh port pair; retries on another pair when the
    /// process dies (someone took a port between the check and the bind).
    fn spawn_node(&self) -> Node {
        let mut tail = String::new();
        for _ in 0..5 {
            let port = cluster_port();
            let p = port.to_string();
            let mut cmd = Command::new("redis-server");
            cmd.args(["--port", &p, "--bind", "127.0.0.1"])
                .args(["--dir", &self.dir.display().to_string()])
                .args(["--logfile", &format!("node-{p}.log"), "--dbfilename", &format!("node-{p}.rdb")])
                .args(["--save", "", "--appendonly", "no"])
                .args(["--cluster-enabled", "yes", "--cluster-config-file", &format!("nodes-{p}.conf")])
                .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
                .args(["--cluster-replica-validity-factor", "0", "--repl-diskless-sync-delay", "0"])
                .current_dir(&self.dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if let Some(pw) = &self.password {
                cmd.args(["--requirepass", pw, "--masterauth", pw]);
            }
            let mut child = cmd.spawn().expect("redis-server must be installed (apt-get install redis-server)");
            let mut exited = false;
            let up = wait_until(Duration::from_secs(30), || {
                exited = !matches!(child.try_wait(), Ok(None));
                exited || pings(port)
            });
            if up && !exited {
                return Node { port, pid: child.id(), child: Some(child) };
            }
            tail = self.log_tail(port, 15);
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server (cluster node) did not come up; last log lines:\n{tail}");
    }

    fn create(&self) {
        let log = self.dir.join("create.log");
        let out = fs::File::create(&log).expect("create.log");
        let mut cmd = Command::new("redis-cli");
        cmd.args(["--cluster", "create"])
            .args(self.nodes())
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("create.log"))
            .stderr(out);
        if let Some(pw) = &self.password {
            cmd.env("REDISCLI_AUTH", pw); // not -a: keeps it out of `ps`
        }
        let mut child = cmd.spawn().expect("redis-cli must be installed (apt-get install redis-tools)");
        let mut status = None;
        wait_until(CLUSTER_DEADLINE, || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        });
        let said = || {
            let text = fs::read_to_string(&log).unwrap_or_default();
            self.scrub(&text[text.len().saturating_sub(3000)..])
        };
        match status {
            Some(s) if s.success() => {}
            Some(s) => {
                panic!("redis-cli --cluster create failed ({s}):\n{}\n{}", said(), self.log_tails())
            }
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("redis-cli --cluster create did not finish in {CLUSTER_DEADLINE:?}:\n{}", said())
            }
        }
    }

    fn wait_formed(&self) {
        let mut why = String::from("not asked yet");
        let formed = wait_until(CLUSTER_DEADLINE, || match self.formed() {
            Ok(()) => true,
            Err(reason) => {
                why = reason;
                false
            }
        });
        assert!(formed, "the cluster did not form in {CLUSTER_DEADLINE:?}: {why}\n{}", self.log_tails());
    }

    /// Ok, or what is still missing.
    fn formed(&self) -> Result<(), String> {
        for port in self.ports() {
            let info = self.info(port, &["CLUSTER", "INFO"]).ok_or(format!("node {port} does not answer"))?;
            let slots = SLOTS.to_string();
            for (field, want) in [
                ("cluster_state", "ok"),
                ("cluster_slots_ok", &slots),
                ("cluster_known_nodes", "6"),
                ("cluster_size", "3"),
            ] {
                if info.get(field).map(String::as_str) != Some(want) {
                    return Err(format!("node {port}: {field} is {:?}, not {want}", info.get(field)));
                }
            }
            let view = self.view(port).ok_or(format!("node {port} does not answer"))?;
            let masters: Vec<&ClusterNode> = view.iter().filter(|n| n.is_master() && !n.slots.is_empty()).collect();
            if masters.len() != 3 || view.iter().any(ClusterNode::failing) {
                return Err(format!("node {port} sees {} masters with slots, or a failing node", masters.len()));
            }
            for m in masters {
                if view.iter().filter(|n| n.master_id == m.id).count() != 1 {
                    return Err(format!("node {port}: master {} does not have one replica", m.port));
                }
            }
        }
        for port in self.ports() {
            let info = self.info(port, &["INFO", "replication"]).ok_or(format!("node {port} does not answer"))?;
            let get = |k: &str| info.get(k).map(String::as_str).unwrap_or("");
            if get("role") == "slave" && get("master_link_status") != "up" {
                return Err(format!("replica {port}: link to its master is {:?}", get("master_link_status")));
            }
            if get("role") == "master" && !get("slave0").contains("state=online") {
                return Err(format!("master {port}: replica not online ({:?})", get("slave0")));
            }
        }
        Ok(())
    }

    /// Every node's port, in start order (killed ones included).
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// Every node as `127.0.0.1:<port>`.
    pub fn nodes(&self) -> Vec<String> {
        self.ports().iter().map(|p| format!("127.0.0.1:{p}")).collect()
    }

    /// The live nodes as `127.0.0.1:p1,...`, as `[redis] nodes` takes it.
    pub fn seeds(&self) -> String {
        self.live_ports().iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",")
    }

    /// The `[redis]` section of a delayer.conf for this cluster.
    pub fn redis_section(&self) -> String {
        let mut text = format!("[redis]\nmode = cluster\nnodes = {}\n", self.seeds());
        if let Some(pw) = &self.password {
            text.push_str(&format!("password = {pw}\n"));
        }
        text
    }

    /// The pid of every node started (killed ones included), in start order.
    pub fn pids(&self) -> Vec<u32> {
        self.nodes.iter().map(|n| n.pid).collect()
    }

    /// How long [`Cluster::start`] took.
    pub fn start_time(&self) -> Duration {
        self.start_time
    }

    /// How long the last [`Cluster::kill_master`] took, kill to takeover.
    pub fn failover_time(&self) -> Duration {
        self.failover_time
    }

    /// Whether the node on `port` is ours and still running.
    pub fn is_alive(&self, port: u16) -> bool {
        self.nodes.iter().any(|n| n.port == port && n.child.is_some())
    }

    fn live_ports(&self) -> Vec<u16> {
        self.nodes.iter().filter(|n| n.child.is_some()).map(|n| n.port).collect()
    }

    fn connection_info(&self, port: u16) -> redis::ConnectionInfo {
        let mut redis_info = redis::RedisConnectionInfo::default();
        if let Some(pw) = &self.password {
            redis_info = redis_info.set_password(pw);
        }
        redis::IntoConnectionInfo::into_connection_info(redis::ConnectionAddr::Tcp("127.0.0.1".into(), port))
            .expect("a loopback address")
            .set_redis_settings(redis_info)
    }

    fn try_connection(&self, port: u16) -> Option<redis::Connection> {
        let client = redis::Client::open(self.connection_info(port)).ok()?;
        let conn = client.get_connection_with_timeout(Duration::from_secs(2)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(15))).ok()?;
        Some(conn)
    }

    /// A plain (not cluster-aware) connection to the node on `port`, with
    /// the password when there is one.
    pub fn connection(&self, port: u16) -> redis::Connection {
        self.try_connection(port).unwrap_or_else(|| panic!("connect to cluster node {port}"))
    }

    /// A command's text reply (`INFO`, `CLUSTER INFO`, `CLUSTER NODES`).
    fn text(&self, port: u16, args: &[&str]) -> Option<String> {
        let mut conn = self.try_connection(port)?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query::<String>(&mut conn).ok()
    }

    fn info(&self, port: u16, args: &[&str]) -> Option<HashMap<String, String>> {
        let text = self.text(port, args)?;
        Some(text.lines().filter_map(|l| l.split_once(':')).map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    fn view(&self, port: u16) -> Option<Vec<ClusterNode>> {
        self.text(port, &["CLUSTER", "NODES"]).map(|text| parse_nodes(&text))
    }

    /// `ask` of the first live node that answers.
    fn first_answer<T>(&self, what: &str, ask: impl Fn(u16) -> Option<T>) -> T {
        self.live_ports().into_iter().find_map(ask).unwrap_or_else(|| panic!("no node of the cluster answers {what}"))
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot(&self, key: &str) -> u16 {
        self.first_answer("CLUSTER KEYSLOT", |port| {
            let mut conn = self.try_connection(port)?;
            redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut conn).ok()
        })
    }

    /// `CLUSTER NODES` as the first live node that answers sees it.
    pub fn topology(&self) -> Vec<ClusterNode> {
        self.first_answer("CLUSTER NODES", |port| self.view(port))
    }

    /// Ports of the masters serving slots, in start order.
    pub fn masters(&self) -> Vec<u16> {
        let view = self.topology();
        self.ports()
            .into_iter()
            .filter(|&p| view.iter().any(|n| n.port == p && n.is_master() && !n.slots.is_empty() && !n.failing()))
            .collect()
    }

    /// The port of the master that owns `key`'s slot.
    pub fn master_for(&self, key: &str) -> u16 {
        let slot = self.slot(key);
        self.topology()
            .iter()
            .find(|n| n.is_master() && !n.failing() && n.owns(slot))
            .map(|n| n.port)
            .unwrap_or_else(|| panic!("no live master owns slot {slot}"))
    }

    /// The port of a live replica of the master on `master`, if any.
    pub fn replica_of(&self, master: u16) -> Option<u16> {
        let view = self.topology();
        let id = &view.iter().find(|n| n.port == master)?.id;
        view.iter().find(|n| &n.master_id == id && !n.failing() && self.is_alive(n.port)).map(|n| n.port)
    }

    /// SIGKILLs the master owning `key`'s slot (the first master when `None`),
    /// then waits until its replica is a master serving those slots in every
    /// surviving node's view, and every survivor reports `cluster_state:ok`.
    /// Returns (killed port, new master port).
    pub fn kill_master(&mut self, key: Option<&str>) -> (u16, u16) {
        let old = match key {
            Some(key) => self.master_for(key),
            None => *self.masters().first().expect("a live master"),
        };
        let replica = self.replica_of(old).unwrap_or_else(|| panic!("master {old} has no live replica to take over"));
        let slot = self
            .topology()
            .iter()
            .find(|n| n.port == old)
            .and_then(|n| n.slots.first().map(|r| r.0))
            .unwrap_or_else(|| panic!("master {old} owns no slot"));
        let began = Instant::now();
        let node = self.nodes.iter_mut().find(|n| n.port == old).expect("the master is one of ours");
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let mut why = String::from("not asked yet");
        let took_over = wait_until(CLUSTER_DEADLINE, || match self.took_over(replica, slot) {
            Ok(()) => true,
            Err(reason) => {
                why = reason;
                false
            }
        });
        assert!(took_over, "no failover from {old} to {replica} in {CLUSTER_DEADLINE:?}: {why}\n{}", self.log_tails());
        self.failover_time = began.elapsed();
        (old, replica)
    }

    fn took_over(&self, replica: u16, slot: u16) -> Result<(), String> {
        let role = self.info(replica, &["INFO", "replication"]).and_then(|i| i.get("role").cloned());
        if role.as_deref() != Some("master") {
            return Err(format!("replica {replica} is not a master yet"));
        }
        for port in self.live_ports() {
            let state = self.info(port, &["CLUSTER", "INFO"]).and_then(|i| i.get("cluster_state").cloned());
            if state.as_deref() != Some("ok") {
                return Err(format!("node {port}: cluster_state is {state:?}"));
            }
            let view = self.view(port).ok_or(format!("node {port} does not answer"))?;
            let owners: Vec<u16> = view.iter().filter(|n| !n.failing() && n.owns(slot)).map(|n| n.port).collect();
            if owners != [replica] {
                return Err(format!("node {port}: slot {slot} is served by {owners:?}, not {replica}"));
            }
        }
        Ok(())
    }

    /// The last lines of a node's log (password scrubbed).
    pub fn log_tail(&self, port: u16, lines: usize) -> String {
        match fs::read_to_string(self.dir.join(format!("node-{port}.log"))) {
            Ok(text) => {
                let all: Vec<&str> = text.lines().collect();
                self.scrub(&all[all.len().saturating_sub(lines)..].join("\n"))
            }
            Err(_) => format!("(no log for node {port})"),
        }
    }

    fn log_tails(&self) -> String {
        self.ports().iter().map(|&p| format!("--- node {p} log ---\n{}\n", self.log_tail(p, 8))).collect()
    }

    fn scrub(&self, text: &str) -> String {
        match &self.password {
            Some(pw) if !pw.is_empty() => text.replace(pw.as_str(), "***"),
            _ => text.to_string(),
        }
    }

    /// The cluster's directory (node logs, `nodes-<port>.conf`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Kills every node and removes the directory; safe to call again (drop does it too).
    pub fn stop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a redis-server answers a PING on `port` (`-NOAUTH` counts: it is up).
fn pings(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 64];
    s.write_all(b"PING\r\n").is_ok()
        && s.read(&mut buf).is_ok_and(|n| n > 0 && (buf.starts_with(b"+PONG") || buf.starts_with(b"-NOAUTH")))
}
