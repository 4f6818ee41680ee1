//! Wake-ups: a script whose write comes before its pool's (or reserved
//! set's) earliest announces `<time> <topic>` on `<prefix>wake` (see
//! `lua/push.lua`), so a server asleep toward a later job, or toward
//! `timer_interval`, moves a short-delay job on time instead of up to
//! `timer_interval` late. In the per-topic layout the announcement is also
//! how the server learns which topics have work: the listener hands each
//! topic to [`Announced`], which the topic mover writes into its index at
//! its next tick (the SDKs write no index).
//!
//! A subscribed connection can do nothing else, so a thread of its own holds
//! one and hands the due times to the timer. Messages published while it is
//! disconnected are lost, so after every (re)subscription (subscribed
//! first, so nothing falls between) it asks for a full rescan and a tick at
//! once: a lost announcement makes a job late by at most the time to notice
//! the cut, subscribe again and rescan (PROTOCOL.md states the bound), never
//! lost. Writers that do not publish (Delayer 1.x clients) are found within
//! `timer_interval` (classic) or by the topic mover's sweeps. A bare `<time>`
//! (older SDKs) is still a wake-up; anything else is ignored, said at most
//! once a minute (see `read_message`).

use crate::config::REDIS_TIMEOUT;
use crate::timer::{Stop, BACKOFF_MAX, BACKOFF_MIN};
use delayer_protocol::numbers;
use delayer_protocol::target::Target;
use log::{debug, info, warn};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// What the listener tells the timer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wake {
    /// Tick now: the listener has just (re)subscribed, and anything published
    /// before that is unknown.
    Now,
    /// A job falls due at this time (Unix seconds, Redis's clock).
    At(f64),
}

/// A refused SUBSCRIBE (an ACL user without the channel) is retried this
/// seldom: the server works without wake-ups, only less promptly.
const REFUSED_RETRY: Duration = Duration::from_secs(30);

/// After this long without a message, the listener PINGs on its
/// subscription: a subscribed connection only reads, so a Redis that
/// stalled (SIGSTOP) or a connection that died silently (a NAT's timeout)
/// would otherwise cost every wake-up from then on. No answer within
/// [`REDIS_TIMEOUT`] ends the subscription, and a new one is made.
const QUIET: Duration = Duration::from_secs(5);

/// Topics announced and not yet written to the index, at most this many: a
/// flood of distinct topics between two ticks asks for a rescan instead
/// (which finds every pool), so memory stays bounded whatever is published.
const MAX_PENDING: usize = 10_000;

/// A longer topic in an announcement is ignored (junk, or a topic no one
/// should name: its jobs are found by the sweeps).
const MAX_TOPIC_BYTES: usize = 4096;

/// Junk messages are said at most this often (with how many were ignored).
const JUNK_EVERY: Duration = Duration::from_secs(60);

/// The mailbox from the listener to the mover: each announced topic with
/// its earliest announced time, and whether a full rescan is asked for
/// (after every (re)subscription). The per-topic layout's mover writes them
/// into its index; the classic one asks a paused or limited topic again
/// when it is announced (a resume, a new limit, a push).
#[derive(Default)]
pub struct Announced {
    pending: Mutex<Pending>,
    /// Any topic name is one (classic layout): braces too.
    any_name: bool,
}

#[derive(Default)]
struct Pending {
    topics: HashMap<String, f64>,
    rescan: bool,
}

impl Announced {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The classic layout's mailbox, where any topic is one (braces too) and
    /// the time of a message counts whatever its topic.
    pub fn classic() -> Announced {
        Announced { any_name: true, ..Announced::default() }
    }

    /// Notes that `topic` has work at `at`; an error says why a topic cannot
    /// be a per-topic layout's topic (the message is junk).
    fn note(&self, topic: &str, at: f64) -> Result<(), &'static str> {
        if self.any_name && (topic.is_empty() || topic.len() > MAX_TOPIC_BYTES) {
            // Not kept (a paused one is asked again after PAUSED_RECHECK).
            return Ok(());
        }
        if topic.is_empty() || topic.len() > MAX_TOPIC_BYTES || (!self.any_name && topic.contains(['{', '}'])) {
            return Err("names no topic of the per-topic layout (empty, over 4096 bytes, or with a brace)");
        }
        let mut pending = self.pending();
        if let Some(known) = pending.topics.get_mut(topic) {
            *known = known.min(at);
        } else if pending.topics.len() < MAX_PENDING {
            pending.topics.insert(topic.to_string(), at);
        } else {
            pending.rescan = true;
        }
        Ok(())
    }

    /// Asks the topic mover for a full rescan at its next tick.
    pub fn rescan(&self) {
        self.pending().rescan = true;
    }

    /// What was announced since the last call, and whether a rescan is due.
    pub fn take(&self) -> (Vec<(String, f64)>, bool) {
        let mut pending = self.pending();
        let rescan = std::mem::take(&mut pending.rescan);
        (std::mem::take(&mut pending.topics).into_iter().collect(), rescan)
    }
}

/// Starts the listener thread; it runs until `stop` is requested or the
/// returned receiver is dropped. `announced`: the per-topic layout's
/// mailbox to its topic mover (`None` in the classic layout).
pub fn listen(
    client: Target,
    channel: String,
    connect_timeout: Duration,
    stop: Arc<Stop>,
    announced: Option<Arc<Announced>>,
) -> UnboundedReceiver<Wake> {
    let (tx, rx) = unbounded_channel();
    let spawned = std::thread::Builder::new().name("wake".into()).spawn(move || {
        let listener = Listener { client, channel, connect_timeout, announced, junk: Junk::default() };
        listener.run(&stop, &tx)
    });
    if let Err(e) = spawned {
        warn!("cannot start the wake-up listener ({e}); short delays may wait up to timer_interval");
    }
    rx
}

struct Listener {
    client: Target,
    channel: String,
    connect_timeout: Duration,
    announced: Option<Arc<Announced>>,
    junk: Junk,
}

/// Junk messages ignored since the last line that said so.
#[derive(Default)]
struct Junk {
    said_at: Option<Instant>,
    ignored: u64,
}

impl Listener {
    fn run(mut self, stop: &Stop, tx: &UnboundedSender<Wake>) {
        let channel = self.channel.clone();
        let mut backoff = BACKOFF_MIN;
        let mut refused_said = false;
        let mut lost_said = false;
        while !stop.requested() {
            let pause = match self.subscribe_and_forward(tx, &mut lost_said) {
                Ended::ReceiverGone => return,
                Ended::Lost(e) if !lost_said => {
                    warn!(
                        "wake-up listener: lost its subscription to {channel} ({e}); subscribing again (meanwhile \
                         jobs pushed with short delays wait for the rescan that follows it)"
                    );
                    lost_said = true;
                    BACKOFF_MIN
                }
                Ended::Lost(e) => {
                    debug!("wake-up listener: {e}; subscribing again");
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    backoff
                }
                Ended::Refused(e) => {
                    if !refused_said {
                        warn!(
                            "redis refused SUBSCRIBE {channel} ({e}); jobs pushed with short delays may wait up to \
                             timer_interval (per-topic layout: up to the sweeps' periods). An ACL user needs the \
                             channel (&{channel})"
                        );
                        refused_said = true;
                    }
                    REFUSED_RETRY
                }
            };
            std::thread::sleep(pause);
        }
    }

    fn subscribe_and_forward(&mut self, tx: &UnboundedSender<Wake>, lost_said: &mut bool) -> Ended {
        let channel = self.channel.as_str();
        // Sentinel mode: the master of the moment (a subscription on a node
        // demoted later still hears PUBLISH, which replicas receive too);
        // cluster mode: the first seed that answers (every node hears every
        // PUBLISH, a script's included).
        let mut conn = match self.client.connect_node(self.connect_timeout) {
            Ok(conn) => conn,
            Err(e) => return Ended::Lost(e),
        };
        // Every reply is bounded, SUBSCRIBE's included (a stalled Redis).
        let bounded =
            conn.set_read_timeout(Some(REDIS_TIMEOUT)).and_then(|()| conn.set_write_timeout(Some(REDIS_TIMEOUT)));
        if let Err(e) = bounded {
            return Ended::Lost(e);
        }
        let mut pubsub = conn.as_pubsub();
        if let Err(e) = pubsub.subscribe(channel) {
            // Only an ACL refusal lasts; anything else (NOAUTH while Redis
            // restarts with new credentials, say) is retried at the usual pace.
            return if e.code() == Some("NOPERM") { Ended::Refused(e) } else { Ended::Lost(e) };
        }
        info!("listening for wake-ups on {channel}");
        *lost_said = false;
        crate::panics::test_trigger("wake");
        // Subscribed first, then the rescan: whatever was published before
        // now is found by it, whatever after is heard.
        if let Some(announced) = &self.announced {
            announced.rescan();
        }
        if tx.send(Wake::Now).is_err() {
            return Ended::ReceiverGone;
        }
        loop {
            let msg = match quiet_or_message(&mut pubsub) {
                Ok(Some(msg)) => msg,
                Ok(None) => continue,
                Err(e) => return Ended::Lost(e),
            };
            let Some(due) = self.take(msg.get_payload_bytes()) else { continue };
            if tx.send(Wake::At(due)).is_err() {
                return Ended::ReceiverGone;
            }
        }
    }

    /// The due time of a message, its topic handed to [`Announced`]; `None`
    /// for junk (said at most once per [`JUNK_EVERY`]).
    fn take(&mut self, payload: &[u8]) -> Option<f64> {
        let read = read_message(payload).and_then(|(at, topic)| match (topic, &self.announced) {
            (Some(topic), Some(announced)) => announced.note(topic, at).map(|()| at),
            _ => Ok(at),
        });
        match read {
            Ok(at) => Some(at),
            Err(why) => {
                self.junk(payload, why);
                None
            }
        }
    }

    /// Says that a message was ignored: at most once per [`JUNK_EVERY`] at
    /// warn (with how many since), else at debug. Junk must not make the
    /// server tick, nor flood the log.
    fn junk(&mut self, payload: &[u8], why: &str) {
        let shown: String = String::from_utf8_lossy(&payload[..payload.len().min(80)]).into_owned();
        let channel = &self.channel;
        self.junk.ignored += 1;
        if self.junk.said_at.is_some_and(|at| at.elapsed() < JUNK_EVERY) {
            debug!("{channel}: ignored a wake-up message {shown:?}: {why}");
            return;
        }
        warn!(
            "{channel}: ignored {} wake-up message(s) since the last such line; the last, {shown:?}, {why} (a wake-up \
             is \"<time> <topic>\" or \"<time>\"; said at most once a minute)",
            self.junk.ignored
        );
        self.junk = Junk { said_at: Some(Instant::now()), ignored: 0 };
    }
}

/// The next message, or `None` after [`QUIET`] without one and a PING that
/// Redis answered; an error when it did not (the subscription is lost).
fn quiet_or_message(pubsub: &mut redis::PubSub<'_>) -> redis::RedisResult<Option<redis::Msg>> {
    pubsub.set_read_timeout(Some(QUIET))?;
    match pubsub.get_message() {
        Err(e) if e.is_timeout() => {
            pubsub.set_read_timeout(Some(REDIS_TIMEOUT))?;
            pubsub.ping::<redis::Value>()?;
            Ok(None)
        }
        other => other.map(Some),
    }
}

/// A wake-up message read: `<time>` or `<time> <topic>` (the topic is
/// everything after the first space, UTF-8). Writers publish Redis's own
/// due times, always within range, so anything else (not a number, `inf`,
/// a negative or a year past 9999, a topic that is not UTF-8: someone else
/// publishing, or junk) is an error saying why.
fn read_message(payload: &[u8]) -> Result<(f64, Option<&str>), &'static str> {
    let (time, topic) = match payload.iter().position(|b| *b == b' ') {
        Some(at) => (&payload[..at], Some(&payload[at + 1..])),
        None => (payload, None),
    };
    let time = std::str::from_utf8(time).map_err(|_| "is not a time")?;
    let read = numbers::time_text(time);
    let at = match (read.odd, read.value) {
        (None, Some(at)) if !time.trim().is_empty() => at.secs(),
        _ => return Err("is not a due time within 1970..9999"),
    };
    match topic {
        None => Ok((at, None)),
        Some(topic) => std::str::from_utf8(topic).map(|t| (at, Some(t))).map_err(|_| "names a topic that is not UTF-8"),
    }
}

enum Ended {
    ReceiverGone,
    /// Connection lost or not to be had: try again soon.
    Lost(redis::RedisError),
    /// Redis refused the channel to our ACL user (NOPERM): try again seldom.
    Refused(redis::RedisError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_a_time_and_perhaps_a_topic() {
        assert_eq!(read_message(b"1763750000.125"), Ok((1763750000.125, None)));
        assert_eq!(read_message(b"1763750000.125 orders"), Ok((1763750000.125, Some("orders"))));
        // The topic is everything after the first space.
        assert_eq!(read_message(b"1763750000 a b "), Ok((1763750000.0, Some("a b "))));
        for junk in [&b""[..], b" t", b"abc", b"inf t", b"-1 t", b"1e300", b"\xff t", b"1763750000 \xff"] {
            assert!(read_message(junk).is_err(), "{junk:?}");
        }
    }

    #[test]
    fn announcements_keep_the_earliest_time_per_topic_and_stay_bounded() {
        let a = Announced::default();
        a.note("t", 20.0).unwrap();
        a.note("t", 10.0).unwrap();
        a.note("t", 30.0).unwrap();
        assert!(a.note("", 1.0).is_err() && a.note("{x}", 1.0).is_err());
        assert_eq!(a.take(), (vec![("t".to_string(), 10.0)], false));
        for i in 0..=MAX_PENDING {
            a.note(&format!("t{i}"), 1.0).unwrap();
        }
        let (topics, rescan) = a.take();
        assert_eq!((topics.len(), rescan), (MAX_PENDING, true));
        assert_eq!(a.take(), (vec![], false));
    }

    #[test]
    fn the_classic_mailbox_takes_any_topic_and_every_messages_time() {
        let a = Announced::classic();
        a.note("{x}", 1.0).unwrap();
        // Too long or empty to keep, but the message's time still counts.
        assert!(a.note("", 2.0).is_ok() && a.note(&"t".repeat(MAX_TOPIC_BYTES + 1), 3.0).is_ok());
        assert_eq!(a.take(), (vec![("{x}".to_string(), 1.0)], false));
    }
}
