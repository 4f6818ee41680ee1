//! The client-side Lua scripts, named.
//!
//! The script texts live once in the repository's `lua/` folder (each states
//! its KEYS and ARGV in its header); `sdk-rust/lua` is a link to it, which
//! `cargo package` follows, so the published crate carries them too. This
//! module only gives them names.
//! `redis::Script` sends them by SHA and loads them again on `NOSCRIPT`.

use redis::Script;
use std::sync::LazyLock;

/// `push.lua`: KEYS pool, bucket; ARGV id, topic, body, delay ms, lifetime
/// ms, max_attempts, backoff, backoff ms, backoff max ms, duplicate policy,
/// wake channel.
pub static PUSH: LazyLock<Script> = LazyLock::new(|| Script::new(PUSH_SRC));
/// `pop.lua`: KEYS ready queue, malformed, pool, reserved; ARGV bucket prefix.
pub static POP: LazyLock<Script> = LazyLock::new(|| Script::new(POP_SRC));
/// `take.lua`: KEYS bucket, malformed, pool, reserved; ARGV id.
pub static TAKE: LazyLock<Script> = LazyLock::new(|| Script::new(TAKE_SRC));
/// `push_many.lua`: KEYS pool; ARGV bucket prefix, duplicate policy, wake
/// channel, then push.lua's ARGV[1..9] per job (up to 100 jobs).
pub static PUSH_MANY: LazyLock<Script> = LazyLock::new(|| Script::new(PUSH_MANY_SRC));
/// `remove.lua`: KEYS pool, bucket; ARGV id.
pub static REMOVE: LazyLock<Script> = LazyLock::new(|| Script::new(REMOVE_SRC));
/// `reserve.lua`: KEYS ready queue, reserved, malformed, receipt_seq, pool;
/// ARGV bucket prefix, ttr ms.
pub static RESERVE: LazyLock<Script> = LazyLock::new(|| Script::new(RESERVE_SRC));
/// `ack.lua`: KEYS reserved, bucket, pool; ARGV id, receipt or "".
pub static ACK: LazyLock<Script> = LazyLock::new(|| Script::new(ACK_SRC));
/// `touch.lua`: KEYS reserved, bucket, pool; ARGV id, receipt or "", ttr ms.
pub static TOUCH: LazyLock<Script> = LazyLock::new(|| Script::new(TOUCH_SRC));
/// `release.lua`: KEYS reserved, pool, malformed; ARGV key prefix, delay ms /
/// "backoff" / "bury", then "held" id receipt wake-channel, or "expired"
/// batch size.
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_SRC));
/// `reschedule.lua`: KEYS pool, bucket; ARGV id, delay ms, wake channel.
pub static RESCHEDULE: LazyLock<Script> = LazyLock::new(|| Script::new(RESCHEDULE_SRC));
/// `dead.lua`: KEYS dead list, pool; ARGV bucket prefix, then "list" start
/// count, or "requeue" / "purge" with a count or ids.
pub static DEAD: LazyLock<Script> = LazyLock::new(|| Script::new(DEAD_SRC));

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
