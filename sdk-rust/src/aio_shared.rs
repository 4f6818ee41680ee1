//! The async client's shared connection, for a fixed Redis, a Sentinel
//! deployment's master, or a Redis Cluster.
//!
//! redis-rs's `ConnectionManager` reconnects by itself, but always to the
//! address it was made for: after a failover that is a dead node or a
//! demoted one. In sentinel mode the manager is therefore replaced, by one
//! for the master the sentinels name, when a call meets a lost connection or
//! a `READONLY` reply. For a fixed Redis it is made once and kept. A
//! cluster's connection (redis-rs follows MOVED, ASK and failovers) is made
//! on first use and kept.

use crate::connection::{routes_of, DEFAULT_CONNECT_TIMEOUT};
use crate::target::Target;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};
use std::sync::{Arc, Mutex};

/// An async connection: to one node, or to a cluster.
#[derive(Clone)]
pub(crate) enum AsyncConn {
    /// The shared, self-reconnecting one (one node).
    Managed(ConnectionManager),
    /// One of its own (a blocking wait, a durable push's WAIT).
    Multiplexed(MultiplexedConnection),
    /// A cluster: each command goes to its key's node.
    Cluster(ClusterConnection),
}

impl AsyncConn {
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, AsyncConn::Cluster(_))
    }

    /// As [`crate::connection::Conn::least_on_nodes_of`].
    pub(crate) async fn least_on_nodes_of(&mut self, cmd: &Cmd, keys: &[String]) -> RedisResult<Value> {
        let AsyncConn::Cluster(cluster) = self else { return cmd.query_async(self).await };
        if keys.is_empty() {
            return cmd.query_async(cluster).await;
        }
        let mut least = i64::MAX;
        for route in routes_of(keys) {
            let to = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
            match cluster.route_command(cmd.clone(), to).await? {
                Value::Int(n) => least = least.min(n),
                other => return Ok(other),
            }
        }
        Ok(Value::Int(least))
    }
}

impl redis::aio::ConnectionLike for AsyncConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            AsyncConn::Managed(c) => c.req_packed_command(cmd),
            AsyncConn::Multiplexed(c) => c.req_packed_command(cmd),
            AsyncConn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            AsyncConn::Managed(c) => c.req_packed_commands(cmd, offset, count),
            AsyncConn::Multiplexed(c) => c.req_packed_commands(cmd, offset, count),
            AsyncConn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            AsyncConn::Managed(c) => c.get_db(),
            AsyncConn::Multiplexed(c) => c.get_db(),
            AsyncConn::Cluster(c) => c.get_db(),
        }
    }
}

/// One multiplexed, self-reconnecting connection shared by clones.
#[derive(Clone)]
pub(crate) struct Shared {
    target: Target,
    config: ConnectionManagerConfig,
    /// The connection in use and its generation (bumped at each replacement,
    /// so concurrent callers that saw the same failure replace it once).
    current: Arc<Mutex<(Option<AsyncConn>, u64)>>,
}

impl Shared {
    /// For a fixed Redis the manager is made now (it connects lazily); in
    /// sentinel and cluster mode, on first use.
    pub(crate) fn new(target: Target, config: ConnectionManagerConfig) -> RedisResult<Shared> {
        let first = if target.follows_failover() || target.is_cluster() {
            None
        } else {
            let client = target.client(DEFAULT_CONNECT_TIMEOUT)?;
            Some(AsyncConn::Managed(ConnectionManager::new_lazy_with_config(client, config.clone())?))
        };
        Ok(Shared { target, config, current: Arc::new(Mutex::new((first, 0))) })
    }

    /// Whether a lost connection or `READONLY` means "ask the sentinels".
    pub(crate) fn follows_failover(&self) -> bool {
        self.target.follows_failover()
    }

    /// The manager to send on, and its generation.
    pub(crate) async fn get(&self) -> RedisResult<(AsyncConn, u64)> {
        let (held, generation) = {
            let slot = self.current.lock().unwrap_or_else(|p| p.into_inner());
            (slot.0.clone(), slot.1)
        };
        match held {
            Some(conn) => Ok((conn, generation)),
            None => self.replace(generation).await,
        }
    }

    /// A manager for the master of the moment, unless another caller has
    /// already replaced generation `seen`.
    pub(crate) async fn replace(&self, seen: u64) -> RedisResult<(AsyncConn, u64)> {
        {
            let slot = self.current.lock().unwrap_or_else(|p| p.into_inner());
            if let (Some(conn), generation) = (&slot.0, slot.1) {
                if generation != seen {
                    return Ok((conn.clone(), generation));
                }
            }
        }
        let conn = if self.target.is_cluster() {
            AsyncConn::Cluster(self.target.connect_cluster_async(DEFAULT_CONNECT_TIMEOUT, None).await?)
        } else {
            let client = self.target.client_async(DEFAULT_CONNECT_TIMEOUT).await?;
            AsyncConn::Managed(ConnectionManager::new_lazy_with_config(client, self.config.clone())?)
        };
        let mut slot = self.current.lock().unwrap_or_else(|p| p.into_inner());
        slot.1 += 1;
        slot.0 = Some(conn.clone());
        Ok((conn, slot.1))
    }
}
