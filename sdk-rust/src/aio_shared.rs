//! The async client's shared connection, for a fixed Redis or a Sentinel
//! deployment's master.
//!
//! redis-rs's `ConnectionManager` reconnects by itself, but always to the
//! address it was made for: after a failover that is a dead node or a
//! demoted one. In sentinel mode the manager is therefore replaced, by one
//! for the master the sentinels name, when a call meets a lost connection or
//! a `READONLY` reply. For a fixed Redis it is made once and kept.

use crate::connection::DEFAULT_CONNECT_TIMEOUT;
use crate::target::Target;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::RedisResult;
use std::sync::{Arc, Mutex};

/// One multiplexed, self-reconnecting connection shared by clones.
#[derive(Clone)]
pub(crate) struct Shared {
    target: Target,
    config: ConnectionManagerConfig,
    /// The manager in use and its generation (bumped at each replacement,
    /// so concurrent callers that saw the same failure replace it once).
    current: Arc<Mutex<(Option<ConnectionManager>, u64)>>,
}

impl Shared {
    /// For a fixed Redis the manager is made now (it connects lazily); in
    /// sentinel mode, on first use.
    pub(crate) fn new(target: Target, config: ConnectionManagerConfig) -> RedisResult<Shared> {
        let first = if target.follows_failover() {
            None
        } else {
            Some(ConnectionManager::new_lazy_with_config(target.client(DEFAULT_CONNECT_TIMEOUT)?, config.clone())?)
        };
        Ok(Shared { target, config, current: Arc::new(Mutex::new((first, 0))) })
    }

    /// Whether a lost connection or `READONLY` means "ask the sentinels".
    pub(crate) fn follows_failover(&self) -> bool {
        self.target.follows_failover()
    }

    /// The manager to send on, and its generation.
    pub(crate) async fn get(&self) -> RedisResult<(ConnectionManager, u64)> {
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
    pub(crate) async fn replace(&self, seen: u64) -> RedisResult<(ConnectionManager, u64)> {
        {
            let slot = self.current.lock().unwrap_or_else(|p| p.into_inner());
            if let (Some(conn), generation) = (&slot.0, slot.1) {
                if generation != seen {
                    return Ok((conn.clone(), generation));
                }
            }
        }
        let client = self.target.client_async(DEFAULT_CONNECT_TIMEOUT).await?;
        let conn = ConnectionManager::new_lazy_with_config(client, self.config.clone())?;
        let mut slot = self.current.lock().unwrap_or_else(|p| p.into_inner());
        slot.1 += 1;
        slot.0 = Some(conn.clone());
        Ok((conn, slot.1))
    }
}
