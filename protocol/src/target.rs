//! Where connections go: one fixed Redis, whichever node the sentinels
//! name as master when the connection is made, or a Redis Cluster.
//!
//! Every connection of the SDK and of the server is opened through a
//! [`Target`], so in sentinel mode each new connection (after a connection
//! error, or a `READONLY` reply from a demoted master) reaches the master of
//! the moment: clients and server follow a failover without a restart.
//! Making a target also settles the TLS crypto provider (`use_default_crypto`).

use crate::cluster::ClusterSettings;
use crate::conf::{RedisSettings, DEFAULT_CONNECT_TIMEOUT};
use crate::sentinel::{self, SentinelSettings};
use redis::cluster::ClusterClient;
use redis::{Client, RedisError, RedisResult, Value};
use std::sync::Arc;
use std::time::Duration;

/// A fixed Redis, or the master of a Sentinel deployment.
#[derive(Clone)]
pub struct Target(Kind);

#[derive(Clone)]
enum Kind {
    Fixed(Arc<Client>),
    Sentinel(Arc<RedisSettings>),
    /// The cluster client, and a client per seed node (pub/sub).
    Cluster(Arc<ClusterClient>, Arc<Vec<Client>>, String),
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Kind::Fixed(client) => write!(f, "Target({})", client.get_connection_info().addr()),
            Kind::Sentinel(settings) => write!(f, "Target({})", settings.describe()),
            Kind::Cluster(_, _, described) => write!(f, "Target({described})"),
        }
    }
}

impl Target {
    /// Always this client's Redis.
    pub fn fixed(client: Client) -> Target {
        crate::conf::use_default_crypto();
        Target(Kind::Fixed(Arc::new(client)))
    }

    /// The master the sentinels of `settings` name, asked at each
    /// connection (`settings.sentinel` must be set; a standalone `settings`
    /// gives a fixed target).
    pub fn sentinel(settings: RedisSettings) -> Target {
        crate::conf::use_default_crypto();
        Target(Kind::Sentinel(Arc::new(settings)))
    }

    /// A Redis Cluster (`settings.cluster` holds its seeds).
    pub fn cluster(settings: &RedisSettings, cluster: &ClusterSettings) -> RedisResult<Target> {
        let client = settings.cluster_client(cluster)?;
        let seeds = cluster
            .nodes
            .iter()
            .map(|(h, p)| settings.node_client(h, *p, cluster.tls))
            .collect::<RedisResult<Vec<_>>>()?;
        Ok(Target(Kind::Cluster(Arc::new(client), Arc::new(seeds), cluster.describe())))
    }

    /// `e`, a failure to reach the cluster, or the error that says a seed is
    /// a Redis without cluster support (a configuration mistake, where
    /// redis-rs reports only that it found no cluster connection).
    pub fn explain(&self, e: RedisError, timeout: Duration) -> RedisError {
        match &self.0 {
            Kind::Cluster(_, seeds, _) if !e.is_connection_refusal() => not_a_cluster(seeds, timeout).unwrap_or(e),
            _ => e,
        }
    }

    /// The cluster client (cluster mode).
    pub(crate) fn cluster_client(&self) -> Option<&ClusterClient> {
        match &self.0 {
            Kind::Cluster(cluster, _, _) => Some(cluster),
            _ => None,
        }
    }

    /// Whether this is a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.0, Kind::Cluster(..))
    }

    /// Whether the address can change (sentinel mode): a `READONLY` reply
    /// then means "ask again", not a misconfiguration.
    pub fn follows_failover(&self) -> bool {
        matches!(self.0, Kind::Sentinel(_))
    }

    fn sentinel_settings(settings: &RedisSettings) -> RedisResult<&SentinelSettings> {
        settings.sentinel.as_ref().ok_or_else(|| sentinel::unavailable("no sentinels configured".into()))
    }

    /// A client for the current master (sentinel mode: asks the sentinels
    /// now; the client does not follow a later failover).
    /// In cluster mode: a client for one seed node (for what any node
    /// answers: pub/sub).
    pub fn client(&self, timeout: Duration) -> RedisResult<Client> {
        match &self.0 {
            Kind::Fixed(client) => Ok(Client::clone(client)),
            Kind::Cluster(_, seeds, _) => {
                seeds.first().cloned().ok_or_else(|| sentinel::unavailable("no seeds".into()))
            }
            Kind::Sentinel(settings) => {
                let s = Self::sentinel_settings(settings)?;
                let (host, port) = sentinel::master_address(s, timeout, |info, t| {
                    settings.client_for(info)?.get_connection_with_timeout(t)
                })?;
                settings.master_client(&host, port)
            }
        }
    }

    /// A connection to one node: the fixed Redis, the sentinels' master, or
    /// (cluster mode) a seed node, for what any node answers (pub/sub).
    pub fn connect_node(&self, timeout: Duration) -> RedisResult<redis::Connection> {
        if let Kind::Cluster(_, seeds, _) = &self.0 {
            // The first seed that answers: any node hears every PUBLISH.
            let mut last = sentinel::unavailable("no seeds".into());
            for seed in seeds.iter() {
                match seed.get_connection_with_timeout(timeout) {
                    Ok(conn) => return Ok(conn),
                    Err(e) => last = e,
                }
            }
            return Err(last);
        }
        let client = self.client(timeout)?;
        let mut conn = client.get_connection_with_timeout(timeout)?;
        if self.follows_failover() {
            conn.set_read_timeout(Some(timeout))?;
            let role: Value = redis::cmd("ROLE").query(&mut conn)?;
            if !sentinel::is_master(&role) {
                return Err(not_master(&client));
            }
            conn.set_read_timeout(None)?;
        }
        Ok(conn)
    }

    /// The async twin of [`Target::client`].
    #[cfg(feature = "aio")]
    pub async fn client_async(&self, timeout: Duration) -> RedisResult<Client> {
        match &self.0 {
            Kind::Fixed(client) => Ok(Client::clone(client)),
            Kind::Cluster(_, seeds, _) => {
                seeds.first().cloned().ok_or_else(|| sentinel::unavailable("no seeds".into()))
            }
            Kind::Sentinel(settings) => {
                let s = Self::sentinel_settings(settings)?;
                let config = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout));
                let (host, port) = sentinel::master_address_async(s, timeout, |info, _| {
                    let config = config.clone();
                    async move { settings.client_for(info)?.get_multiplexed_async_connection_with_config(&config).await }
                })
                .await?;
                settings.master_client(&host, port)
            }
        }
    }

    /// An async connection to the cluster (cluster mode), with `response`
    /// as its bound on each reply (`None`: none, for blocking waits).
    #[cfg(feature = "aio")]
    pub async fn connect_cluster_async(
        &self,
        timeout: Duration,
        response: Option<Duration>,
    ) -> RedisResult<redis::cluster_async::ClusterConnection> {
        let Kind::Cluster(cluster, _, _) = &self.0 else {
            return Err(sentinel::unavailable("not a cluster".into()));
        };
        let mut config = redis::cluster::ClusterConfig::new().set_connection_timeout(timeout);
        if let Some(response) = response {
            config = config.set_response_timeout(response);
        }
        cluster.get_async_connection_with_config(config).await
    }

    /// The async twin of [`Target::connect`]: a multiplexed connection with
    /// `config`, checked to be a master's in sentinel mode.
    #[cfg(feature = "aio")]
    pub async fn connect_async(
        &self,
        timeout: Duration,
        config: &redis::AsyncConnectionConfig,
    ) -> RedisResult<redis::aio::MultiplexedConnection> {
        let client = self.client_async(timeout).await?;
        let mut conn = client.get_multiplexed_async_connection_with_config(config).await?;
        if self.follows_failover() {
            let role: Value = redis::cmd("ROLE").query_async(&mut conn).await?;
            if !sentinel::is_master(&role) {
                return Err(not_master(&client));
            }
        }
        Ok(conn)
    }
}

/// The clients and targets of a `[redis]` section: here rather than with
/// the section's reading, since the targets themselves hold the settings.
impl RedisSettings {
    /// A redis-rs client, with the TLS certificates when given. In sentinel
    /// mode, a client for the master the sentinels name now: it does not
    /// follow a failover (use [`RedisSettings::target`] for that).
    /// In cluster mode, a client for the first seed node (one node: for
    /// what any node answers, such as pub/sub).
    pub fn client(&self) -> redis::RedisResult<redis::Client> {
        if self.sentinel.is_some() {
            return self.target()?.client(DEFAULT_CONNECT_TIMEOUT);
        }
        if let Some(c) = &self.cluster {
            let (host, port) = c.nodes.first().ok_or_else(|| sentinel::unavailable("no cluster nodes".into()))?;
            return self.node_client(host, *port, c.tls);
        }
        self.client_for(self.connection_info()?)
    }

    /// Where connections go: this address, the master the sentinels name
    /// at each connection (sentinel mode), or the cluster (cluster mode).
    pub fn target(&self) -> redis::RedisResult<Target> {
        if let Some(c) = &self.cluster {
            return Target::cluster(self, c);
        }
        match &self.sentinel {
            None => Ok(Target::fixed(self.client()?)),
            Some(_) => Ok(Target::sentinel(self.clone())),
        }
    }
}

fn not_master(client: &Client) -> redis::RedisError {
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(host, port) | redis::ConnectionAddr::TcpTls { host, port, .. } => {
            sentinel::not_master(host, *port)
        }
        other => sentinel::unavailable(format!("{other} is not a master")),
    }
}

/// Whether `e` is a demoted master's refusal to write: in sentinel mode, the
/// connection is to be replaced and the call made again (nothing was
/// written).
pub fn is_read_only(e: &redis::RedisError) -> bool {
    e.code() == Some("READONLY") || e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
}

/// When a seed answers as a Redis without cluster support, the error that
/// says so (a server would otherwise wait for an outage to end).
fn not_a_cluster(seeds: &[Client], timeout: Duration) -> Option<RedisError> {
    seeds.iter().find_map(|seed| {
        let mut conn = seed.get_connection_with_timeout(timeout).ok()?;
        conn.set_read_timeout(Some(timeout)).ok()?;
        let info: String = redis::cmd("INFO").arg("cluster").query(&mut conn).ok()?;
        info.contains("cluster_enabled:0").then(|| {
            let detail = format!(
                "{} has cluster support disabled (cluster_enabled:0): mode = cluster needs the nodes of a Redis \
                 Cluster; for one Redis use mode = standalone",
                seed.get_connection_info().addr()
            );
            RedisError::from((redis::ErrorKind::InvalidClientConfig, "not a cluster node", detail))
        })
    })
}
