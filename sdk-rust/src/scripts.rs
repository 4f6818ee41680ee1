//! The client-side Lua scripts, named.
//!
//! The script texts live once in the repository's `lua/` folder (each states
//! its KEYS and ARGV in its header); this module only gives them names.
//! `redis::Script` sends them by SHA and loads them again on `NOSCRIPT`.

use redis::Script;
use std::sync::LazyLock;

/// `push.lua`: KEYS pool, bucket; ARGV id, topic, body, delay ms, lifetime ms.
pub static PUSH: LazyLock<Script> = LazyLock::new(|| Script::new(PUSH_SRC));
/// `pop.lua`: KEYS ready queue, malformed; ARGV bucket prefix.
pub static POP: LazyLock<Script> = LazyLock::new(|| Script::new(POP_SRC));
/// `take.lua`: KEYS bucket, malformed; ARGV id.
pub static TAKE: LazyLock<Script> = LazyLock::new(|| Script::new(TAKE_SRC));
/// `push_many.lua`: KEYS pool; ARGV bucket prefix, then id, topic, body,
/// delay ms, lifetime ms per job (up to 100 jobs).
pub static PUSH_MANY: LazyLock<Script> = LazyLock::new(|| Script::new(PUSH_MANY_SRC));
/// `remove.lua`: KEYS pool, bucket; ARGV id.
pub static REMOVE: LazyLock<Script> = LazyLock::new(|| Script::new(REMOVE_SRC));

/// Source of `lua/push.lua`.
pub const PUSH_SRC: &str = include_str!("../../lua/push.lua");
/// Source of `lua/push_many.lua`.
pub const PUSH_MANY_SRC: &str = include_str!("../../lua/push_many.lua");
/// Source of `lua/pop.lua`.
pub const POP_SRC: &str = include_str!("../../lua/pop.lua");
/// Source of `lua/take.lua`.
pub const TAKE_SRC: &str = include_str!("../../lua/take.lua");
/// Source of `lua/remove.lua`.
pub const REMOVE_SRC: &str = include_str!("../../lua/remove.lua");
