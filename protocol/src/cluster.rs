//! Redis Cluster: the `[redis] mode = cluster` settings and the redis-rs
//! cluster client they make.
//!
//! A cluster spreads keys over its masters by hash slot, so only the
//! per-topic key layout can use one (each topic's keys share a slot; the
//! classic layout keeps every job in one key): the config readers refuse
//! cluster mode with the classic layout. redis-rs routes each command by
//! its key and follows MOVED, ASK and failovers.

use crate::conf::file::{ConfError, ConfFile};
use crate::sentinel::{read_nodes, read_tls};
use std::fmt;

/// Keys that name one fixed address, or the sentinels' master.
const NOT_IN_CLUSTER: [&str; 6] = ["url", "host", "port", "master_name", "sentinel_username", "sentinel_password"];

/// How to reach a Redis Cluster.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// Seed nodes; the client learns the rest of the cluster from them.
    pub nodes: Vec<(String, u16)>,
    /// TLS to every node (`tls_*` files apply).
    pub tls: bool,
}

impl fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterSettings").field("nodes", &self.nodes).field("tls", &self.tls).finish()
    }
}

impl ClusterSettings {
    /// `host:port,...` of the seeds, for logs.
    pub fn describe(&self) -> String {
        let nodes: Vec<String> = self.nodes.iter().map(|(h, p)| format!("{h}:{p}")).collect();
        format!("cluster of {}", nodes.join(","))
    }
}

/// Reads the cluster keys when `[redis] mode = cluster` (else `None`).
pub fn from_conf(conf: &ConfFile) -> Result<Option<ClusterSettings>, ConfError> {
    if conf.string("redis", "mode").as_deref() != Some("cluster") {
        return Ok(None);
    }
    let err = |key: &str, message: String| conf.error(Some("redis"), Some(key), message);
    if let Some(key) = NOT_IN_CLUSTER.into_iter().find(|k| conf.string("redis", k).is_some()) {
        return Err(err(key, "not used with mode = cluster: the nodes name the cluster".into()));
    }
    if conf.string("redis", "database").is_some_and(|d| d.trim() != "0") {
        return Err(err("database", "Redis Cluster has only database 0".into()));
    }
    let nodes = conf
        .string("redis", "nodes")
        .ok_or_else(|| err("mode", "mode = cluster needs nodes (seed nodes: host:port,host:port,...)".into()))?;
    let tls = read_tls(conf)?;
    Ok(Some(ClusterSettings { nodes: read_nodes(conf, &nodes)?, tls }))
}

/// The message for `mode = cluster` with the classic layout.
pub const NEEDS_TOPIC_LAYOUT: &str =
    "mode = cluster needs [delayer] layout = topic (the classic layout keeps every job in one key)";

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> Result<Option<ClusterSettings>, String> {
        from_conf(&ConfFile::parse("d.conf".into(), text).expect("parses")).map_err(|e| e.to_string())
    }

    #[test]
    fn seeds_are_read_and_what_a_cluster_cannot_use_is_refused() {
        let got = conf("[redis]\nmode = cluster\nnodes = a:7000, [::1]:7001\n").expect("cluster");
        assert_eq!(got.map(|c| c.nodes), Some(vec![("a".into(), 7000), ("::1".into(), 7001)]));
        assert_eq!(conf("[redis]\nport = 1\n"), Ok(None));
        for (text, message) in [
            ("[redis]\nmode = cluster\n", "d.conf:2: [redis] mode: mode = cluster needs nodes"),
            (
                "[redis]\nmode = cluster\nnodes = a:1\ndatabase = 3\n",
                "d.conf:4: [redis] database: Redis Cluster has only",
            ),
            ("[redis]\nmode = cluster\nnodes = a:1\nmaster_name = m\n", "d.conf:4: [redis] master_name: not used"),
            ("[redis]\nmode = cluster\nnodes = a\n", "d.conf:3: [redis] nodes: \"a\" is not host:port"),
            ("[redis]\nmode = cluster\nnodes = a:1\ntls = maybe\n", "d.conf:4: [redis] tls: \"maybe\" is not yes"),
        ] {
            let err = conf(text).expect_err(text);
            assert!(err.starts_with(message), "{text:?}: {err}");
        }
    }
}
