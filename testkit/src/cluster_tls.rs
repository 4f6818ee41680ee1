//! A local Redis Cluster that speaks TLS only, with a private CA, client
//! certificates required (`tls-auth-clients yes`) and an ACL user: the
//! deployment of a team that runs its cluster on its own PKI. Three masters,
//! no replicas (failovers are [`crate::cluster`]'s), TLS on the client ports
//! and on the cluster bus, joined by `redis-cli --tls --cluster create`, and
//! stopped on drop.
//!
//! The `default` user is off, so only [`USER`] gets in: a client that
//! forgets the credentials, the CA or the client certificate is refused.

use crate::cluster::{cluster_port, SLOTS};
use crate::sentinel::make_certificates;
use crate::{temp_dir, wait_until};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How long forming the cluster may take on a slow, loaded machine.
pub const TLS_CLUSTER_DEADLINE: Duration = Duration::from_secs(90);

/// The ACL user every client must be.
pub const USER: &str = "delayer";

/// [`USER`]'s password.
pub const PASSWORD: &str = "tls-cluster-acl-pw";

/// The test PKI, all PEM files made by openssl in one directory.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The nodes' certificate (also their client certificate on the bus).
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// The private CA that signed every certificate here.
    pub ca: PathBuf,
    /// A client certificate signed by the CA, and its key.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// Makes a CA, a server certificate for 127.0.0.1 and a client certificate,
/// in `dir`.
pub fn make_pki(dir: &Path) -> Pki {
    let (server_cert, server_key, ca) = make_certificates(dir);
    crate::sentinel::sign_by_ca(dir, "client", "/CN=delayer test client", "extendedKeyUsage=clientAuth");
    Pki { server_cert, server_key, ca, client_cert: dir.join("client.pem"), client_key: dir.join("client.key") }
}

/// Three TLS-only masters on loopback.
pub struct TlsCluster {
    nodes: Vec<Child>,
    ports: Vec<u16>,
    dir: PathBuf,
    pki: Pki,
}

impl TlsCluster {
    /// Makes the PKI, starts three nodes, creates the cluster and waits
    /// until every node reports `cluster_state:ok` and knows the other two.
    pub fn start() -> TlsCluster {
        let dir = temp_dir("tls-cluster");
        let pki = make_pki(&dir);
        // Built first and filled in: a panic on the way drops it, which kills what started.
        let mut cluster = TlsCluster { nodes: Vec::new(), ports: Vec::new(), dir, pki };
        for _ in 0..3 {
            let port = cluster_port();
            let child = cluster.spawn_node(port);
            cluster.nodes.push(child);
            cluster.ports.push(port);
        }
        let up =
            wait_until(TLS_CLUSTER_DEADLINE, || cluster.ports.iter().all(|&p| cluster.ask(p, &["PING"]).is_some()));
        assert!(up, "the TLS cluster's nodes did not answer\n{}", cluster.log_tails());
        cluster.create();
        let mut why = String::new();
        let formed = wait_until(TLS_CLUSTER_DEADLINE, || {
            cluster.ports.iter().all(|&p| {
                let info = cluster.ask(p, &["CLUSTER", "INFO"]).unwrap_or_default();
                let ok = info.contains("cluster_state:ok")
                    && info.contains("cluster_known_nodes:3")
                    && info.contains(&format!("cluster_slots_ok:{SLOTS}"));
                if !ok {
                    why = format!("node {p}: {}", info.lines().take(4).collect::<Vec<_>>().join(" "));
                }
                ok
            })
        });
        assert!(formed, "the TLS cluster did not form: {why}\n{}", cluster.log_tails());
        cluster
    }

    fn spawn_node(&self, port: u16) -> Child {
        let p = port.to_string();
        let file = |path: &Path| path.display().to_string();
        Command::new("redis-server")
            .args(["--port", "0", "--tls-port", &p, "--bind", "127.0.0.1"])
            .args(["--tls-cert-file", &file(&self.pki.server_cert), "--tls-key-file", &file(&self.pki.server_key)])
            .args(["--tls-ca-cert-file", &file(&self.pki.ca), "--tls-auth-clients", "yes", "--tls-cluster", "yes"])
            .args(["--cluster-enabled", "yes", "--cluster-config-file", &format!("nodes-{p}.conf")])
            .args(["--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no"])
            .args(["--dir", &file(&self.dir), "--logfile", &format!("node-{p}.log")])
            .args(["--user", "default", "off"])
            .args(["--user", USER, "on", &format!(">{PASSWORD}"), "~*", "&*", "+@all"])
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)")
    }

    fn create(&self) {
        let file = |path: &Path| path.display().to_string();
        let out = Command::new("redis-cli")
            .args(["--tls", "--cacert", &file(&self.pki.ca)])
            .args(["--cert", &file(&self.pki.client_cert), "--key", &file(&self.pki.client_key)])
            .args(["--user", USER])
            .env("REDISCLI_AUTH", PASSWORD) // not --pass: keeps it out of `ps`
            .args(["--cluster", "create"])
            .args(self.ports.iter().map(|p| format!("127.0.0.1:{p}")))
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli must be installed (apt-get install redis-tools)");
        assert!(
            out.status.success(),
            "redis-cli --tls --cluster create failed:\n{}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log_tails()
        );
    }

    /// A TLS connection to the node on `port` as [`USER`], with the CA and
    /// the client certificate.
    pub fn connection(&self, port: u16) -> Option<redis::Connection> {
        let read = |path: &Path| fs::read(path).ok();
        let certs = redis::TlsCertificates {
            client_tls: Some(redis::ClientTlsConfig {
                client_cert: read(&self.pki.client_cert)?,
                client_key: read(&self.pki.client_key)?,
            }),
            root_cert: Some(read(&self.pki.ca)?),
        };
        let url = format!("rediss://{USER}:{PASSWORD}@127.0.0.1:{port}/");
        let client = redis::Client::build_with_tls(url, certs).ok()?;
        let conn = client.get_connection_with_timeout(Duration::from_secs(5)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(15))).ok()?;
        Some(conn)
    }

    /// A command's reply as text, or `None` when the node does not answer.
    fn ask(&self, port: u16, args: &[&str]) -> Option<String> {
        let mut conn = self.connection(port)?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query::<String>(&mut conn).ok()
    }

    /// The nodes' ports.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// The nodes as `127.0.0.1:p1,...`, as `[redis] nodes` takes it.
    pub fn seeds(&self) -> String {
        self.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect::<Vec<_>>().join(",")
    }

    /// The test PKI's files.
    pub fn pki(&self) -> &Pki {
        &self.pki
    }

    /// The `[redis]` section of a delayer.conf for this cluster: TLS with the
    /// private CA, the client certificate, and the ACL user.
    pub fn redis_section(&self) -> String {
        format!(
            "[redis]\nmode = cluster\nnodes = {}\ntls = yes\ntls_ca_file = {}\ntls_cert_file = {}\n\
             tls_key_file = {}\nusername = {USER}\npassword = {PASSWORD}\n",
            self.seeds(),
            self.pki.ca.display(),
            self.pki.client_cert.display(),
            self.pki.client_key.display(),
        )
    }

    /// The cluster's directory (node logs, certificates).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn log_tails(&self) -> String {
        self.ports
            .iter()
            .map(|p| {
                let text = fs::read_to_string(self.dir.join(format!("node-{p}.log"))).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                format!("--- node {p} log ---\n{}\n", lines[lines.len().saturating_sub(8)..].join("\n"))
            })
            .collect()
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        for child in &mut self.nodes {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}
