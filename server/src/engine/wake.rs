//! Wake-ups: a push whose due time comes before the pool's earliest
//! publishes it on `<prefix>wake` (see `lua/push.lua`), so a server asleep
//! toward a later job, or toward `timer_interval`, moves a short-delay job on
//! time instead of up to `timer_interval` late.
//!
//! A subscribed connection can do nothing else, so a thread of its own holds
//! one and hands the due times to the timer. Messages published while it is
//! disconnected are lost, so after every (re)subscription it asks for a tick
//! at once: a lost wake-up can make a job at most `timer_interval` late,
//! never lose it. Writers that do not publish (Delayer 1.x clients) get that
//! same bound. A message that is not a due time within range is ignored
//! (see [`due_time`]).

use crate::config::REDIS_TIMEOUT;
use crate::oddities;
use crate::timer::{Stop, BACKOFF_MAX, BACKOFF_MIN};
use delayer_protocol::numbers;
use delayer_protocol::target::Target;
use log::{debug, info, warn};
use std::sync::Arc;
use std::time::Duration;
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

/// Starts the listener thread; it runs until `stop` is requested or the
/// returned receiver is dropped.
pub fn listen(client: Target, channel: String, connect_timeout: Duration, stop: Arc<Stop>) -> UnboundedReceiver<Wake> {
    let (tx, rx) = unbounded_channel();
    let spawned = std::thread::Builder::new()
        .name("wake".into())
        .spawn(move || run(&client, &channel, connect_timeout, &stop, &tx));
    if let Err(e) = spawned {
        warn!("cannot start the wake-up listener ({e}); short delays may wait up to timer_interval");
    }
    rx
}

fn run(client: &Target, channel: &str, connect_timeout: Duration, stop: &Stop, tx: &UnboundedSender<Wake>) {
    let mut backoff = BACKOFF_MIN;
    let mut refused_said = false;
    let mut lost_said = false;
    while !stop.requested() {
        let pause = match subscribe_and_forward(client, channel, connect_timeout, tx, &mut lost_said) {
            Ended::ReceiverGone => return,
            Ended::Lost(e) if !lost_said => {
                warn!(
                    "wake-up listener: lost its subscription to {channel} ({e}); subscribing again (meanwhile jobs \
                     pushed with short delays may wait up to timer_interval)"
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
                         timer_interval. An ACL user needs the channel (&{channel})"
                    );
                    refused_said = true;
                }
                REFUSED_RETRY
            }
        };
        std::thread::sleep(pause);
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

/// The due time a wake-up message carries, if it carries one the server
/// can use. Writers publish Redis's own due times, always within range, so
/// anything else (not a number, `inf`, a negative or a year past 9999:
/// someone else publishing, or junk) is ignored, said once: it must not make
/// the server tick, or a flood of junk would keep the mover busy. A job
/// whose wake-up was lost is still moved within timer_interval.
fn due_time(channel: &str, payload: &[u8]) -> Option<f64> {
    let text = String::from_utf8_lossy(payload);
    let read = numbers::time_text(&text);
    if read.odd.is_some() {
        oddities::report(channel, "a wake-up message", &text, "is not a due time within 1970..9999: ignored");
        return None;
    }
    read.value.map(numbers::Time::secs)
}

enum Ended {
    ReceiverGone,
    /// Connection lost or not to be had: try again soon.
    Lost(redis::RedisError),
    /// Redis refused the channel to our ACL user (NOPERM): try again seldom.
    Refused(redis::RedisError),
}

fn subscribe_and_forward(
    client: &Target,
    channel: &str,
    connect_timeout: Duration,
    tx: &UnboundedSender<Wake>,
    lost_said: &mut bool,
) -> Ended {
    // Sentinel mode: the master of the moment (a subscription on a node
    // demoted later still hears PUBLISH, which replicas receive too);
    // cluster mode: the first seed that answers (every node hears every
    // PUBLISH).
    let mut conn = match client.connect_node(connect_timeout) {
        Ok(conn) => conn,
        Err(e) => return Ended::Lost(e),
    };
    // Every reply is bounded, SUBSCRIBE's included (a stalled Redis).
    let bounded = conn.set_read_timeout(Some(REDIS_TIMEOUT)).and_then(|()| conn.set_write_timeout(Some(REDIS_TIMEOUT)));
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
    if tx.send(Wake::Now).is_err() {
        return Ended::ReceiverGone;
    }
    loop {
        let msg = match quiet_or_message(&mut pubsub) {
            Ok(Some(msg)) => msg,
            Ok(None) => continue,
            Err(e) => return Ended::Lost(e),
        };
        let Some(due) = due_time(channel, msg.get_payload_bytes()) else { continue };
        if tx.send(Wake::At(due)).is_err() {
            return Ended::ReceiverGone;
        }
    }
}
