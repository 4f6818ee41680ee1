//! A local Redis Sentinel deployment for failover tests: one master, one
//! replica and three sentinels, all `redis-server` processes on free
//! loopback ports, stopped on drop.
//!
//! The sentinels watch the master as [`MASTER_NAME`] with quorum 2, call it
//! down after 1 s without an answer and may retry a failover after 3 s, so
//! after [`Sentinels::kill_master`] the replica is promoted within seconds.
//! The Python twin (`testkit/sentinel.py`) serves the Python and PHP suites.

use crate::{free_port, temp_dir, wait_until, RedisServer, DEADLINE};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The name the sentinels monitor the master under.
pub const MASTER_NAME: &str = "delayer-master";

/// How long a failover may take on a slow, loaded machine.
pub const FAILOVER_DEADLINE: Duration = Duration::from_secs(60);

/// The master's and the sentinels' passwords, and TLS, when a test wants them.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    /// `requirepass` of the master and replica (`masterauth` too).
    pub redis_password: Option<String>,
    /// `requirepass` of the sentinels.
    pub sentinel_password: Option<String>,
    /// TLS only, everywhere (nodes, replication, sentinels): the server
    /// certificate, its key and the CA (see [`make_certificates`]).
    pub tls: Option<(PathBuf, PathBuf, PathBuf)>,
}

/// A CA, and a server certificate for 127.0.0.1 signed by it, made with
/// Runs `openssl <args>` in `dir`, which must succeed.
pub(crate) fn openssl_in(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl installed");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// openssl in `dir`: (certificate, key, CA).
pub fn make_certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let openssl = |args: &[&str]| openssl_in(dir, args);
    let ca = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2"];
    openssl(&[&ca[..], &["-subj", "/CN=delayer test CA"]].concat());
    sign_by_ca(dir, "server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1");
    (dir.join("server.pem"), dir.join("server.key"), dir.join("ca.pem"))
}

/// A key `<name>.key` and certificate `<name>.pem` in `dir`, signed by the
/// CA there (`ca.pem`, `ca.key`), with `extension` (an openssl extfile line).
pub(crate) fn sign_by_ca(dir: &Path, name: &str, subject: &str, extension: &str) {
    let (key, csr, pem, ext) =
        (format!("{name}.key"), format!("{name}.csr"), format!("{name}.pem"), format!("{name}-ext.cnf"));
    openssl_in(dir, &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", subject]);
    fs::write(dir.join(&ext), format!("{extension}\n")).expect("extension file");
    let x509 = ["x509", "-req", "-in", &csr, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial"];
    openssl_in(dir, &[&x509[..], &["-out", &pem, "-days", "2", "-extfile", &ext]].concat());
}

/// One master, one replica, three sentinels.
pub struct Sentinels {
    /// The nodes: the first is the master at start.
    pub nodes: Vec<RedisServer>,
    sentinels: Vec<(Child, u16)>,
    dir: PathBuf,
    auth: Auth,
}

impl Sentinels {
    /// Starts everything and waits until the sentinels know the replica and
    /// each other (a failover needs them to).
    pub fn start() -> Sentinels {
        Sentinels::start_with(Auth::default())
    }

    /// As [`Sentinels::start`], with passwords.
    pub fn start_with(auth: Auth) -> Sentinels {
        // No diskless-sync delay (5 s by default in Redis 7): whichever node
        // is master, after a failover too, feeds its replica at once.
        let mut common = vec!["--save".to_string(), String::new(), "--appendonly".into(), "no".into()];
        common.extend(["--repl-diskless-sync-delay".into(), "0".into()]);
        if let Some(pw) = &auth.redis_password {
            common.extend(["--requirepass".into(), pw.clone(), "--masterauth".into(), pw.clone()]);
        }
        if auth.tls.is_some() {
            common.extend(["--tls-replication".into(), "yes".into()]);
        }
        let args: Vec<&str> = common.iter().map(String::as_str).collect();
        let start = |args: &[&str]| match &auth.tls {
            Some((cert, key, ca)) => RedisServer::start_tls_with(cert, key, ca, args),
            None => RedisServer::start_with(args),
        };
        let master = start(&args);
        let replicaof = format!("127.0.0.1 {}", master.port());
        let mut replica_args = args.clone();
        replica_args.extend(["--replicaof", &replicaof]);
        let replica = start(&replica_args);
        let dir = temp_dir("sentinels");
        let mut sentinels = Vec::new();
        for i in 0..3 {
            let port = free_port();
            let conf = dir.join(format!("sentinel-{i}.conf"));
            let listen = match &auth.tls {
                Some((cert, key, ca)) => format!(
                    "port 0\ntls-port {port}\ntls-cert-file {}\ntls-key-file {}\ntls-ca-cert-file {}\n\
                     tls-auth-clients no\ntls-replication yes\n",
                    cert.display(),
                    key.display(),
                    ca.display()
                ),
                None => format!("port {port}\n"),
            };
            let mut text = format!(
                "{listen}bind 127.0.0.1\ndir {dir}\nlogfile sentinel-{i}.log\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 3000\nsentinel parallel-syncs {MASTER_NAME} 1\n",
                dir = dir.display(),
                master = master.port()
            );
            if let Some(pw) = &auth.redis_password {
                text.push_str(&format!("sentinel auth-pass {MASTER_NAME} {pw}\n"));
            }
            if let Some(pw) = &auth.sentinel_password {
                text.push_str(&format!("requirepass {pw}\nsentinel sentinel-pass {pw}\n"));
            }
            fs::write(&conf, text).expect("write sentinel conf");
            let child = Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server must be installed");
            sentinels.push((child, port));
        }
        let deployment = Sentinels { nodes: vec![master, replica], sentinels, dir, auth };
        let ready = wait_until(FAILOVER_DEADLINE, || {
            deployment.sentinel_ports().iter().all(|&port| {
                deployment.ask(port, &["SENTINEL", "MASTER", MASTER_NAME]).is_some_and(|fields| {
                    field(&fields, "num-other-sentinels") == Some("2") && field(&fields, "num-slaves") == Some("1")
                })
            })
        });
        assert!(
            ready,
            "the sentinels did not find each other and the replica in time; see {}",
            deployment.dir.display()
        );
        let synced = wait_until(DEADLINE, || deployment.node_info(1, "master_link_status").as_deref() == Some("up"));
        assert!(synced, "the replica did not sync with the master");
        deployment
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|(_, port)| *port).collect()
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`, as `[redis] nodes` takes it.
    pub fn nodes_setting(&self) -> String {
        self.sentinel_ports().iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",")
    }

    /// The `[redis]` section of a delayer.conf for this deployment.
    pub fn redis_section(&self) -> String {
        let mut text =
            format!("[redis]\nmode = sentinel\nnodes = {}\nmaster_name = {MASTER_NAME}\n", self.nodes_setting());
        if let Some(pw) = &self.auth.redis_password {
            text.push_str(&format!("password = {pw}\n"));
        }
        if let Some(pw) = &self.auth.sentinel_password {
            text.push_str(&format!("sentinel_password = {pw}\n"));
        }
        if let Some((_, _, ca)) = &self.auth.tls {
            text.push_str(&format!("tls = yes\ntls_ca_file = {}\n", ca.display()));
        }
        text
    }

    /// The master's port as the sentinels see it now (any sentinel that answers).
    pub fn master_port(&self) -> Option<u16> {
        self.sentinel_ports().iter().find_map(|&port| {
            let reply = self.ask(port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME])?;
            reply.get(1)?.parse().ok()
        })
    }

    /// A plain connection to the node at index `i` of [`Sentinels::nodes`].
    pub fn connection(&self, i: usize) -> redis::Connection {
        self.client(self.nodes[i].port(), self.auth.redis_password.as_ref())
            .and_then(|c| c.get_connection().ok())
            .expect("connect to a test node")
    }

    /// A client of the process on `port` (TLS with the test CA when the
    /// deployment speaks TLS).
    fn client(&self, port: u16, password: Option<&String>) -> Option<redis::Client> {
        let auth = password.map(|pw| format!(":{pw}@")).unwrap_or_default();
        match &self.auth.tls {
            None => redis::Client::open(format!("redis://{auth}127.0.0.1:{port}/")).ok(),
            Some((_, _, ca)) => redis::Client::build_with_tls(
                format!("rediss://{auth}127.0.0.1:{port}/"),
                redis::TlsCertificates { client_tls: None, root_cert: Some(fs::read(ca).ok()?) },
            )
            .ok(),
        }
    }

    /// A connection to the master of the moment.
    pub fn master_connection(&self) -> redis::Connection {
        let port = self.master_port().expect("a sentinel answers");
        let i = self.nodes.iter().position(|n| n.port() == port).expect("the master is one of ours");
        self.connection(i)
    }

    /// Kills the current master with SIGKILL and waits until the sentinels
    /// name the other node and it accepts writes. Returns the new master's
    /// index in [`Sentinels::nodes`].
    pub fn kill_master(&mut self) -> usize {
        let old = self.master_port().expect("a sentinel answers");
        let old_i = self.nodes.iter().position(|n| n.port() == old).expect("the master is one of ours");
        self.nodes[old_i].kill();
        let new_i = 1 - old_i;
        let new_port = self.nodes[new_i].port();
        let moved = wait_until(FAILOVER_DEADLINE, || self.master_port() == Some(new_port));
        assert!(moved, "no failover to port {new_port}; see {}", self.dir.display());
        let writable = wait_until(FAILOVER_DEADLINE, || self.node_info(new_i, "role").as_deref() == Some("master"));
        assert!(writable, "the promoted replica did not become a master");
        new_i
    }

    /// A failover asked of the sentinels (`SENTINEL FAILOVER`): the master
    /// stays up and is demoted to a replica, so connections to it stay open
    /// and writes on them get `READONLY`. Returns the new master's index.
    pub fn switch_master(&mut self) -> usize {
        let old = self.master_port().expect("a sentinel answers");
        let new_i = 1 - self.nodes.iter().position(|n| n.port() == old).expect("the master is one of ours");
        let new_port = self.nodes[new_i].port();
        let asked = wait_until(FAILOVER_DEADLINE, || {
            self.master_port() == Some(new_port)
                || self.sentinel_ports().iter().any(|&p| self.ask_ok(p, &["SENTINEL", "FAILOVER", MASTER_NAME]))
        });
        assert!(asked, "no sentinel accepted SENTINEL FAILOVER");
        let moved = wait_until(FAILOVER_DEADLINE, || {
            self.master_port() == Some(new_port)
                && self.node_info(new_i, "role").as_deref() == Some("master")
                && self.node_info(1 - new_i, "role").as_deref() == Some("slave")
        });
        assert!(moved, "no switch to port {new_port}; see {}", self.dir.display());
        new_i
    }

    fn ask_ok(&self, port: u16, args: &[&str]) -> bool {
        let Some(client) = self.client(port, self.auth.sentinel_password.as_ref()) else { return false };
        let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_secs(2)) else { return false };
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query::<()>(&mut conn).is_ok()
    }

    /// A field of `INFO replication` of node `i`, if it answers.
    fn node_info(&self, i: usize, name: &str) -> Option<String> {
        let client = self.client(self.nodes[i].port(), self.auth.redis_password.as_ref())?;
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(2)).ok()?;
        let info: String = redis::cmd("INFO").arg("replication").query(&mut conn).ok()?;
        info.lines().find_map(|l| l.strip_prefix(&format!("{name}:")).map(|v| v.trim().to_string()))
    }

    /// A sentinel's reply as strings (nil and errors: `None`).
    fn ask(&self, port: u16, args: &[&str]) -> Option<Vec<String>> {
        let client = self.client(port, self.auth.sentinel_password.as_ref())?;
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(2)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query::<Option<Vec<String>>>(&mut conn).ok().flatten()
    }
}

/// The value after `name` in a flat name/value list.
fn field<'a>(fields: &'a [String], name: &str) -> Option<&'a str> {
    fields.chunks(2).find(|kv| kv[0] == name).and_then(|kv| kv.get(1)).map(String::as_str)
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for (child, _) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}
