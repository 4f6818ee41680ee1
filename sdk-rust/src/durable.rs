//! Durable pushes: `WAIT 1 <timeout>` after the write, on its connection.
//!
//! Redis replicates asynchronously: a push the master acknowledged can be
//! lost when the master dies before its replica has it, and a failover then
//! promotes a replica without it (bench/RESULTS.md measures how many). A
//! client made with `durable(timeout)` asks Redis, after each push script
//! and on the same connection, to wait until at least one replica has the
//! write, and says so with [`crate::Error::NotReplicated`] when none did in
//! time: the job is on the master, but a failover now could lose it, and the
//! caller can push it again (or alert). What is sent and how the reply
//! reads is here; the clients do the I/O.

use crate::error::{Error, NotReplicated, Result};
use crate::ops::Request;
use redis::Value;
use std::time::{Duration, SystemTime};

/// How many replicas must acknowledge a durable push.
pub const REPLICAS: u32 = 1;

/// `WAIT 1 <timeout ms>` (at least 1 ms: 0 would wait forever) on the
/// nodes that hold `keys`, the keys just written.
pub(crate) fn wait(timeout: Duration, keys: Vec<String>) -> Request {
    let mut cmd = redis::cmd("WAIT");
    cmd.arg(REPLICAS).arg(timeout.as_millis().clamp(1, u128::from(u64::MAX)) as u64);
    Request::Replicas(cmd, timeout, keys)
}

/// The number of replicas WAIT says have the write.
pub(crate) fn acked(reply: Value) -> Result<u64> {
    match reply {
        Value::Int(n) if n >= 0 => Ok(n as u64),
        other => Err(Error::Protocol(format!("WAIT answered {other:?}, not a count of replicas"))),
    }
}

/// `Ok(due)` when every call was acknowledged by a replica, otherwise
/// [`Error::NotReplicated`] with the due times of the jobs written.
pub(crate) fn check<T>(least_acked: u64, due: Vec<SystemTime>, timeout: Duration, ok: T) -> Result<T> {
    if least_acked >= u64::from(REPLICAS) {
        return Ok(ok);
    }
    Err(Error::NotReplicated(NotReplicated { due, timeout }))
}
