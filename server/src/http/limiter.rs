//! Guessing tokens, slowed down: each client address has a bucket of
//! [`BURST`] wrong attempts (a wrong bearer token, a forged session, a
//! failed sign-in), refilled one per [`REFILL`]. An empty bucket answers 429
//! with `Retry-After` before any token is compared, a right one included,
//! so guessing goes no faster than the refill.
//!
//! The log names the address, once at its first refusal and then at most
//! once per [`REPORT_EVERY`] with counts. Memory is bounded: at most
//! [`MAX_ADDRESSES`] buckets (IPv6 addresses are grouped by /64, which one
//! host can hold whole); past that, new addresses share one bucket.

use crate::http::tally::Tally;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong attempts an address may make at once.
pub const BURST: u32 = 10;
/// One more attempt per this long (ten a minute).
pub const REFILL: Duration = Duration::from_secs(6);
/// Buckets kept; past this, new addresses share one.
pub const MAX_ADDRESSES: usize = 4096;
/// At most one line per address per this long.
pub const REPORT_EVERY: Duration = Duration::from_secs(60);
/// Lines per sweep, at most; the rest are summed up in one.
const LINES_PER_SWEEP: usize = 20;

/// Whom a bucket is for: an address, or every address past the table's
/// bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Addr(IpAddr),
    Others,
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Addr(IpAddr::V6(v6)) => write!(f, "{v6}/64"),
            Key::Addr(ip) => write!(f, "{ip}"),
            Key::Others => f.write_str("addresses past the limiter's table"),
        }
    }
}

#[derive(Debug, Clone)]
struct Bucket {
    /// Attempts left, refilled by time.
    left: f64,
    updated: Instant,
    refusals: Tally,
    wrong: u64,
    limited: u64,
}

impl Bucket {
    fn new(now: Instant) -> Bucket {
        Bucket { left: f64::from(BURST), updated: now, refusals: Tally::new(), wrong: 0, limited: 0 }
    }

    fn refill(&mut self, now: Instant) {
        let earned = now.saturating_duration_since(self.updated).as_secs_f64() / REFILL.as_secs_f64();
        self.left = (self.left + earned).min(f64::from(BURST));
        self.updated = now;
    }

    /// Nothing to remember: full, nothing to report.
    fn idle(&self) -> bool {
        self.left >= f64::from(BURST) && self.refusals.pending() == 0
    }
}

/// The buckets.
#[derive(Debug, Default)]
pub struct Limiter {
    buckets: Mutex<HashMap<Key, Bucket>>,
}

/// The address as limited: IPv4 (also when mapped into IPv6), or an IPv6
/// address's /64.
fn key_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
        v4 => v4,
    }
}

impl Limiter {
    /// `Err(retry after)` when `client` has no attempt left (counted as a
    /// refusal); `Ok` otherwise, before its credentials are checked.
    pub fn check(&self, client: IpAddr) -> Result<(), Duration> {
        let now = Instant::now();
        let mut buckets = self.lock();
        let mut key = Key::Addr(key_of(client));
        if !buckets.contains_key(&key) && buckets.len() >= MAX_ADDRESSES {
            key = Key::Others;
        }
        // An address without a bucket has all its attempts.
        let Some(bucket) = buckets.get_mut(&key) else { return Ok(()) };
        bucket.refill(now);
        if bucket.left >= 1.0 {
            return Ok(());
        }
        bucket.limited += 1;
        let due = bucket.refusals.add(now, REPORT_EVERY);
        report(key, bucket, due, "");
        Err(Duration::from_secs(((1.0 - bucket.left) * REFILL.as_secs_f64()).ceil().max(1.0) as u64))
    }

    /// `client` presented wrong credentials (`what`: "a sign-in", "a bearer
    /// token", "a session"); logged as [`Limiter`] says.
    pub fn failed(&self, client: IpAddr, what: &str) {
        let now = Instant::now();
        let mut buckets = self.lock();
        let mut key = Key::Addr(key_of(client));
        if !buckets.contains_key(&key) && buckets.len() >= MAX_ADDRESSES {
            buckets.retain(|_, b| {
                b.refill(now);
                !b.idle()
            });
            if buckets.len() >= MAX_ADDRESSES {
                key = Key::Others;
            }
        }
        let bucket = buckets.entry(key).or_insert_with(|| Bucket::new(now));
        bucket.refill(now);
        bucket.left = (bucket.left - 1.0).max(0.0);
        bucket.wrong += 1;
        let due = bucket.refusals.add(now, REPORT_EVERY);
        report(key, bucket, due, what);
    }

    /// Says what is pending and forgets the idle buckets; run every
    /// [`REPORT_EVERY`].
    pub fn sweep(&self) {
        let now = Instant::now();
        let mut buckets = self.lock();
        let mut lines = 0;
        let (mut more_addresses, mut more_refusals) = (0u64, 0u64);
        for (key, bucket) in buckets.iter_mut() {
            bucket.refill(now);
            if bucket.refusals.pending() == 0 {
                continue;
            }
            if lines < LINES_PER_SWEEP {
                let due = bucket.refusals.due(now, REPORT_EVERY);
                if report(*key, bucket, due, "") {
                    lines += 1;
                }
            } else {
                more_addresses += 1;
                more_refusals += bucket.refusals.pending();
            }
        }
        if more_addresses > 0 {
            log::warn!(
                "http: and {more_refusals} refused attempt(s) from {more_addresses} more address(es) (said in the \
                 next minutes)"
            );
        }
        buckets.retain(|_, b| !b.idle());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Bucket>> {
        self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// One line about `key`'s refusals when `due` (its tally's verdict) says
/// so; `what`: the kind of the wrong credentials just counted, if any.
/// Whether it wrote.
fn report(key: Key, bucket: &mut Bucket, due: Option<u64>, what: &str) -> bool {
    if due.is_none() {
        return false;
    }
    let (wrong, limited) = (std::mem::take(&mut bucket.wrong), std::mem::take(&mut bucket.limited));
    let last = if what.is_empty() { String::new() } else { format!(" (the last: {what})") };
    log::warn!(
        "http: wrong credentials from {key}: {wrong} wrong, {limited} refused with 429 since the last report{last}; \
         an address may try {BURST} times, then once per {} s",
        REFILL.as_secs()
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_burst_then_waits() {
        let limiter = Limiter::default();
        let a: IpAddr = "192.0.2.1".parse().expect("ip");
        let b: IpAddr = "192.0.2.2".parse().expect("ip");
        for _ in 0..BURST {
            assert!(limiter.check(a).is_ok());
            limiter.failed(a, "a bearer token");
        }
        let wait = limiter.check(a).expect_err("limited");
        assert!(wait >= Duration::from_secs(1) && wait <= REFILL, "{wait:?}");
        // Another address is not slowed down.
        assert!(limiter.check(b).is_ok());
        // IPv6 addresses of one /64 share a bucket; a mapped IPv4 is the IPv4.
        let v6 = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert_eq!(key_of(v6("2001:db8::1")), key_of(v6("2001:db8::ffff:1")));
        assert_ne!(key_of(v6("2001:db8::1")), key_of(v6("2001:db8:0:1::1")));
        assert_eq!(key_of(v6("::ffff:192.0.2.1")), a);
    }

    #[test]
    fn the_table_is_bounded_and_the_rest_share_a_bucket() {
        let limiter = Limiter::default();
        for i in 0..(MAX_ADDRESSES as u32 + 500) {
            limiter.failed(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i)), "a sign-in");
        }
        assert_eq!(limiter.len(), MAX_ADDRESSES + 1);
        // The 500 past the bound spent the shared bucket: the next new address
        // is limited too.
        let newcomer = IpAddr::V4(std::net::Ipv4Addr::new(172, 16, 0, 1));
        limiter.failed(newcomer, "a sign-in");
        assert!(limiter.check(newcomer).is_err());
        limiter.sweep();
        assert!(limiter.len() <= MAX_ADDRESSES + 1);
    }
}
