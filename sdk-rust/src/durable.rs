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
use crate::ops::{Op, Request};
use redis::Value;
use std::time::{Duration, SystemTime};

/// How many replicas must acknowledge a durable push.
pub const REPLICAS: u32 = 1;

/// The write `op`, then for a durable client (`Some(timeout)`) `WAIT 1
/// <timeout ms>` (at least 1 ms: 0 would wait forever) on the nodes that
/// hold `keys`, the keys just written, on the write's own connection: its
/// reply and how many replicas have it (`u64::MAX` when not durable).
pub(crate) fn written<'a>(op: Op<'a, Value>, durable: Option<Duration>, keys: Vec<String>) -> Op<'a, (Value, u64)> {
    let Some(timeout) = durable else { return op.map(|reply| Ok((reply, u64::MAX))) };
    let mut cmd = redis::cmd("WAIT");
    cmd.arg(REPLICAS).arg(timeout.as_millis().clamp(1, u128::from(u64::MAX)) as u64);
    let wait = Request::Replicas(cmd, timeout, keys);
    op.then(move |reply| Ok(Op::call(wait, move |n| Ok((reply, acked(n)?))))).alone()
}

/// The number of replicas WAIT says have the write.
fn acked(reply: Value) -> Result<u64> {
    match reply {
        Value::Int(n) if n >= 0 => Ok(n as u64),
        other => Err(Error::Protocol(format!("WAIT answered {other:?}, not a count of replicas"))),
    }
}

/// `Ok(ok)` when every call was acknowledged by a replica (or the client
/// is not durable), otherwise [`Error::NotReplicated`] with the due times of
/// the jobs written.
pub(crate) fn check<T>(least_acked: u64, due: Vec<SystemTime>, durable: Option<Duration>, ok: T) -> Result<T> {
    if least_acked >= u64::from(REPLICAS) {
        return Ok(ok);
    }
    Err(Error::NotReplicated(NotReplicated { due, timeout: durable.unwrap_or_default() }))
}
