//! Whether Redis may evict Delayer's keys: its `maxmemory-policy`.
//!
//! Under any policy but `noeviction`, a Redis at its `maxmemory` deletes
//! keys to make room, and Delayer's are keys like any other: a job hash
//! (which carries a TTL, so the `volatile-*` policies pick exactly them) or
//! a whole pool, gone without a trace but an orphan count. The server,
//! `delayer webhook` and the Rust SDK's workers read the policy at start and
//! at every reconnect and warn unless it is `noeviction`; this is the one
//! place that reads it and words the warning. `CONFIG GET` first; where
//! CONFIG is not allowed (an ACL user without it, a managed Redis), the
//! `maxmemory_policy` line of `INFO memory`.

use redis::{ConnectionLike, Value};

/// The only policy under which Redis never deletes a key to free memory.
pub const SAFE: &str = "noeviction";

/// Whether `policy` keeps every key (is `noeviction`).
pub fn is_safe(policy: &str) -> bool {
    policy == SAFE
}

/// The warning for an unsafe `policy`: what it does, and the fix.
pub fn warning(policy: &str) -> String {
    format!(
        "redis maxmemory-policy is {policy}: Redis may evict job data and lose jobs; set maxmemory-policy \
         noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf)"
    )
}

/// The policy Redis reports, or why it could not be read.
pub fn read(conn: &mut impl ConnectionLike) -> Result<String, String> {
    let config = redis::cmd("CONFIG").arg("GET").arg("maxmemory-policy").query::<Value>(conn);
    if let Some(policy) = config.as_ref().ok().and_then(from_config) {
        return Ok(policy);
    }
    let info = redis::cmd("INFO").arg("memory").query::<String>(conn);
    match info {
        Ok(text) => from_info(&text).ok_or_else(|| "INFO memory has no maxmemory_policy".to_string()),
        Err(e) => Err(match config {
            Err(c) => format!("CONFIG GET refused ({c}), INFO memory too ({e})"),
            Ok(_) => format!("INFO memory refused ({e})"),
        }),
    }
}

/// The async twin of [`read`].
#[cfg(feature = "aio")]
pub async fn read_async(conn: &mut impl redis::aio::ConnectionLike) -> Result<String, String> {
    let config = redis::cmd("CONFIG").arg("GET").arg("maxmemory-policy").query_async::<Value>(conn).await;
    if let Some(policy) = config.as_ref().ok().and_then(from_config) {
        return Ok(policy);
    }
    match redis::cmd("INFO").arg("memory").query_async::<String>(conn).await {
        Ok(text) => from_info(&text).ok_or_else(|| "INFO memory has no maxmemory_policy".to_string()),
        Err(e) => Err(format!("CONFIG GET and INFO memory refused ({e})")),
    }
}

/// `CONFIG GET`'s `[name, value]` (RESP2) or `{name: value}` (RESP3).
fn from_config(reply: &Value) -> Option<String> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    match reply {
        Value::Array(items) => items.get(1).and_then(text),
        Value::Map(pairs) => pairs.first().and_then(|(_, v)| text(v)),
        _ => None,
    }
}

/// The `maxmemory_policy:<policy>` line of `INFO memory`.
fn from_info(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.trim().strip_prefix("maxmemory_policy:")).map(|p| p.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_read_from_config_or_info() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let reply = Value::Array(vec![bulk("maxmemory-policy"), bulk("allkeys-lru")]);
        assert_eq!(from_config(&reply).as_deref(), Some("allkeys-lru"));
        assert_eq!(from_config(&Value::Array(vec![])), None);
        let info = "# Memory\r\nused_memory:1\r\nmaxmemory_policy:volatile-ttl\r\nmem_fragmentation_ratio:1\r\n";
        assert_eq!(from_info(info).as_deref(), Some("volatile-ttl"));
        assert!(is_safe("noeviction") && !is_safe("allkeys-lru"));
        assert!(warning("volatile-lru").contains("CONFIG SET maxmemory-policy noeviction"));
    }
}
