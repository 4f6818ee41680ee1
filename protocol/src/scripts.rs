//! The client-side Lua scripts, named: the Rust client's calls and the
//! server's (its expiry runs release.lua) send these.
//!
//! The script texts live once in the repository's `lua/` folder; each states
//! its KEYS and ARGV in its header, which is the contract the client's call
//! builders (and the server's) follow, so it is not repeated here
//! (conformance/test_conformance_contract.py holds every call to it).
//! `protocol/lua` is a link to that folder, which `cargo package` follows,
//! so the published crate carries them too. This module only gives them
//! names.
//! Where the layouts need different work a script comes in a pair built
//! from one source in `lua/layouts/`: `<name>.lua` for the classic layout,
//! `<name>_topic.lua` for the per-topic one (`*_TOPIC` here);
//! [`crate::keys::Names::pick`] chooses.
//! `redis::Script` sends them by SHA and loads them again on `NOSCRIPT`.

use redis::Script;
use std::sync::LazyLock;

/// `push.lua` (its header states its KEYS and ARGV).
pub static PUSH: LazyLock<Script> = LazyLock::new(|| Script::new(PUSH_SRC));
/// `pop.lua` (its header states its KEYS and ARGV).
pub static POP: LazyLock<Script> = LazyLock::new(|| Script::new(POP_SRC));
/// `take.lua` (its header states its KEYS and ARGV).
pub static TAKE: LazyLock<Script> = LazyLock::new(|| Script::new(TAKE_SRC));
/// `push_many.lua` (its header states its KEYS and ARGV).
pub static PUSH_MANY: LazyLock<Script> = LazyLock::new(|| Script::new(PUSH_MANY_SRC));
/// `remove.lua` (its header states its KEYS and ARGV).
pub static REMOVE: LazyLock<Script> = LazyLock::new(|| Script::new(REMOVE_SRC));
/// `reserve.lua` (its header states its KEYS and ARGV).
pub static RESERVE: LazyLock<Script> = LazyLock::new(|| Script::new(RESERVE_SRC));
/// `ack.lua` (its header states its KEYS and ARGV).
pub static ACK: LazyLock<Script> = LazyLock::new(|| Script::new(ACK_SRC));
/// `touch.lua` (its header states its KEYS and ARGV).
pub static TOUCH: LazyLock<Script> = LazyLock::new(|| Script::new(TOUCH_SRC));
/// `release.lua` (its header states its KEYS and ARGV).
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_SRC));
/// `reschedule.lua` (its header states its KEYS and ARGV).
pub static RESCHEDULE: LazyLock<Script> = LazyLock::new(|| Script::new(RESCHEDULE_SRC));
/// `dead.lua` (its header states its KEYS and ARGV).
pub static DEAD: LazyLock<Script> = LazyLock::new(|| Script::new(DEAD_SRC));
/// `lookup.lua`: KEYS bucket, pool, reserved; ARGV id, topic or "", flow-pool prefix or "".
pub static LOOKUP: LazyLock<Script> = LazyLock::new(|| Script::new(LOOKUP_SRC));
/// `list.lua`: KEYS a ZSET (pool or reserved); ARGV bucket prefix, topic,
/// start rank, count, most entries examined.
pub static LIST: LazyLock<Script> = LazyLock::new(|| Script::new(LIST_SRC));
/// `push_topic.lua`, push.lua's per-topic twin (its header states its KEYS and ARGV).
pub static PUSH_TOPIC: LazyLock<Script> = LazyLock::new(|| Script::new(PUSH_TOPIC_SRC));
/// `push_many_topic.lua` (its header states its KEYS and ARGV).
pub static PUSH_MANY_TOPIC: LazyLock<Script> = LazyLock::new(|| Script::new(PUSH_MANY_TOPIC_SRC));
/// `remove_topic.lua` (its header states its KEYS and ARGV).
pub static REMOVE_TOPIC: LazyLock<Script> = LazyLock::new(|| Script::new(REMOVE_TOPIC_SRC));
/// `release_topic.lua` (its header states its KEYS and ARGV).
pub static RELEASE_TOPIC: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_TOPIC_SRC));
/// `dead_topic.lua` (its header states its KEYS and ARGV).
pub static DEAD_TOPIC: LazyLock<Script> = LazyLock::new(|| Script::new(DEAD_TOPIC_SRC));
/// `flow.lua`: a topic's flow control read, paused or resumed (classic
/// layout; its header states its KEYS and ARGV).
pub static FLOW: LazyLock<Script> = LazyLock::new(|| Script::new(FLOW_SRC));
/// `flow_topic.lua`, flow.lua's per-topic twin.
pub static FLOW_TOPIC: LazyLock<Script> = LazyLock::new(|| Script::new(FLOW_TOPIC_SRC));
/// `stats.lua`: KEYS topics, scheduled_count, pool, reserved; ARGV ready
/// prefix, dead prefix, bucket prefix, cap on reserved ids read.
pub static STATS: LazyLock<Script> = LazyLock::new(|| Script::new(STATS_SRC));

/// Source of `lua/push.lua`.
pub const PUSH_SRC: &str = include_str!("../lua/push.lua");
/// Source of `lua/push_many.lua`.
pub const PUSH_MANY_SRC: &str = include_str!("../lua/push_many.lua");
/// Source of `lua/pop.lua`.
pub const POP_SRC: &str = include_str!("../lua/pop.lua");
/// Source of `lua/take.lua`.
pub const TAKE_SRC: &str = include_str!("../lua/take.lua");
/// Source of `lua/remove.lua`.
pub const REMOVE_SRC: &str = include_str!("../lua/remove.lua");
/// Source of `lua/reserve.lua`.
pub const RESERVE_SRC: &str = include_str!("../lua/reserve.lua");
/// Source of `lua/ack.lua`.
pub const ACK_SRC: &str = include_str!("../lua/ack.lua");
/// Source of `lua/touch.lua`.
pub const TOUCH_SRC: &str = include_str!("../lua/touch.lua");
/// Source of `lua/release.lua`.
pub const RELEASE_SRC: &str = include_str!("../lua/release.lua");
/// Source of `lua/reschedule.lua`.
pub const RESCHEDULE_SRC: &str = include_str!("../lua/reschedule.lua");
/// Source of `lua/dead.lua`.
pub const DEAD_SRC: &str = include_str!("../lua/dead.lua");
/// Source of `lua/lookup.lua`.
pub const LOOKUP_SRC: &str = include_str!("../lua/lookup.lua");
/// Source of `lua/list.lua`.
pub const LIST_SRC: &str = include_str!("../lua/list.lua");
/// Source of `lua/push_topic.lua`.
pub const PUSH_TOPIC_SRC: &str = include_str!("../lua/push_topic.lua");
/// Source of `lua/push_many_topic.lua`.
pub const PUSH_MANY_TOPIC_SRC: &str = include_str!("../lua/push_many_topic.lua");
/// Source of `lua/remove_topic.lua`.
pub const REMOVE_TOPIC_SRC: &str = include_str!("../lua/remove_topic.lua");
/// Source of `lua/release_topic.lua`.
pub const RELEASE_TOPIC_SRC: &str = include_str!("../lua/release_topic.lua");
/// Source of `lua/dead_topic.lua`.
pub const DEAD_TOPIC_SRC: &str = include_str!("../lua/dead_topic.lua");
/// Source of `lua/flow.lua`.
pub const FLOW_SRC: &str = include_str!("../lua/flow.lua");
/// Source of `lua/flow_topic.lua`.
pub const FLOW_TOPIC_SRC: &str = include_str!("../lua/flow_topic.lua");
/// Source of `lua/stats.lua`.
pub const STATS_SRC: &str = include_str!("../lua/stats.lua");
