//! Where connections go: one fixed Redis, or whichever node the sentinels
//! name as master when the connection is made.
//!
//! Every connection of the SDK and of the server is opened through a
//! [`Target`], so in sentinel mode each new connection (after a connection
//! error, or a `READONLY` reply from a demoted master) reaches the master of
//! the moment: clients and server follow a failover without a restart.

use crate::conf::RedisSettings;
use crate::sentinel::{self, SentinelSettings};
use redis::{Client, Connection, RedisResult, Value};
use std::sync::Arc;
use std::time::Duration;

/// A fixed Redis, or the master of a Sentinel deployment.
#[derive(Clone)]
pub struct Target(Kind);

#[derive(Clone)]
enum Kind {
    Fixed(Arc<Client>),
    Sentinel(Arc<RedisSettings>),
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Kind::Fixed(client) => write!(f, "Target({})", client.get_connection_info().addr()),
            Kind::Sentinel(settings) => write!(f, "Target({})", settings.describe()),
        }
    }
}

impl Target {
    /// Always this client's Redis.
    pub fn fixed(client: Client) -> Target {
        Target(Kind::Fixed(Arc::new(client)))
    }

    /// The master the sentinels of `settings` name, asked at each
    /// connection (`settings.sentinel` must be set; a standalone `settings`
    /// gives a fixed target).
    pub fn sentinel(settings: RedisSettings) -> Target {
        Target(Kind::Sentinel(Arc::new(settings)))
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
    pub fn client(&self, timeout: Duration) -> RedisResult<Client> {
        match &self.0 {
            Kind::Fixed(client) => Ok(Client::clone(client)),
            Kind::Sentinel(settings) => {
                let s = Self::sentinel_settings(settings)?;
                let (host, port) = sentinel::master_address(s, timeout, |info, t| {
                    settings.client_for(info)?.get_connection_with_timeout(t)
                })?;
                settings.master_client(&host, port)
            }
        }
    }

    /// A connection to Redis (sentinel mode: to the node the sentinels name,
    /// checked to be a master). `timeout` bounds each step of connecting.
    pub fn connect(&self, timeout: Duration) -> RedisResult<Connection> {
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
