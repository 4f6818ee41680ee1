//! Key names, built in one place.
//!
//! Every Redis key Delayer touches is named here (see docs/PROTOCOL.md), the
//! server's included: scripts get every name they touch as a key, or as a
//! per-kind prefix (`*_prefix`) for names that depend on data they read, and
//! never build one themselves. The two layouts ([`Layout`]) differ here
//! alone: a client asks [`Names`] for what each call on a topic passes.

use crate::validate::{self, Invalid, Result};

/// The default key prefix, shared with Delayer 1.x.
pub const DEFAULT_PREFIX: &str = "delayer:";

/// Builds the names of Delayer's keys under one prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Default for Keys {
    fn default() -> Self {
        Keys::new(DEFAULT_PREFIX)
    }
}

impl Keys {
    /// Keys under `prefix`, prepended as is (`"shop:delayer:"` gives
    /// `shop:delayer:job_pool`).
    pub fn new(prefix: impl Into<String>) -> Self {
        Keys { prefix: prefix.into() }
    }

    /// The prefix every key starts with.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The ZSET of waiting job ids, scored by due time.
    pub fn job_pool(&self) -> String {
        format!("{}job_pool", self.prefix)
    }

    /// The HASH holding one job's topic and body.
    pub fn job_bucket(&self, id: &str) -> String {
        format!("{}{id}", self.bucket_prefix())
    }

    /// [`Keys::job_bucket`] for an id read back from Redis as raw bytes.
    pub fn job_bucket_bytes(&self, id: &[u8]) -> Vec<u8> {
        let mut key = self.bucket_prefix().into_bytes();
        key.extend_from_slice(id);
        key
    }

    /// What [`Keys::job_bucket`] puts before the id (scripts append ids to it).
    pub fn bucket_prefix(&self) -> String {
        format!("{}job_bucket:", self.prefix)
    }

    /// The LIST of ready ids of one topic.
    pub fn ready_queue(&self, topic: &str) -> String {
        format!("{}{topic}", self.ready_queue_prefix())
    }

    /// What [`Keys::ready_queue`] puts before the topic.
    pub fn ready_queue_prefix(&self) -> String {
        format!("{}ready_queue:", self.prefix)
    }

    /// A SCAN pattern matching every ready queue (the prefix's glob
    /// characters escaped).
    pub fn ready_queue_pattern(&self) -> String {
        glob_prefix(&self.ready_queue_prefix())
    }

    /// The LIST of ids whose bucket could not be routed.
    pub fn malformed(&self) -> String {
        format!("{}malformed", self.prefix)
    }

    /// The HASH of one topic's flow control (`paused` since when): every
    /// hand-out script reads it (docs/design/flow-control.md).
    pub fn flow(&self, topic: &str) -> String {
        format!("{}flow:{topic}", self.prefix)
    }

    /// The LIST consumers of a paused topic wait on (`BRPOPLPUSH`): absent
    /// while paused, written by a resume, which wakes them all.
    pub fn flow_gate(&self, topic: &str) -> String {
        format!("{}flow_gate:{topic}", self.prefix)
    }

    /// The ZSET of `topic`'s due ids set aside while the topic is under flow
    /// control (scored by due time): the classic mover sends them here
    /// instead of the ready queue, so a paused topic's backlog never sits in
    /// the shared pool, and `move_flow.lua` drains it once the topic runs.
    pub fn flow_pool(&self, topic: &str) -> String {
        format!("{}flow_pool:{topic}", self.prefix)
    }

    /// What every flow pool's key starts with (scripts that learn the topic
    /// from a bucket add it).
    pub fn flow_pool_prefix(&self) -> String {
        format!("{}flow_pool:", self.prefix)
    }

    /// A SCAN pattern matching every topic's flow pool (`delayer migrate`).
    pub fn flow_pool_pattern(&self) -> String {
        glob_prefix(&self.flow_pool_prefix())
    }

    /// A SCAN pattern matching every topic's flow hash (`delayer migrate`).
    pub fn flow_pattern(&self) -> String {
        glob_prefix(&format!("{}flow:", self.prefix))
    }

    /// The SET of topics whose due ids the classic mover sets aside: topics
    /// under flow control, and topics whose flow pool still holds ids.
    pub fn flow_topics(&self) -> String {
        format!("{}flow_topics", self.prefix)
    }

    /// The ZSET of reserved ids, scored by their reservation's deadline.
    pub fn reserved(&self) -> String {
        format!("{}reserved", self.prefix)
    }

    /// The counter reservation receipts are taken from.
    pub fn receipt_seq(&self) -> String {
        format!("{}receipt_seq", self.prefix)
    }

    /// The HASH of jobs waiting in the pool per topic (topic -> count).
    pub fn scheduled_count(&self) -> String {
        format!("{}scheduled_count", self.prefix)
    }

    /// The SET of every topic the server has moved jobs of.
    pub fn topics(&self) -> String {
        format!("{}topics", self.prefix)
    }

    /// The HASH of ended reservations per outcome and topic
    /// (`acked:<topic>` -> count, see [`OUTCOMES`]).
    pub fn outcomes(&self) -> String {
        format!("{}outcomes", self.prefix)
    }

    /// The pub/sub channel (not a key) on which pushes publish a due time
    /// earlier than the pool's earliest, so a sleeping server wakes for it.
    pub fn wake(&self) -> String {
        format!("{}wake", self.prefix)
    }

    /// The LIST of one topic's dead letters.
    pub fn dead(&self, topic: &str) -> String {
        format!("{}{topic}", self.dead_prefix())
    }

    /// What [`Keys::dead`] puts before the topic.
    pub fn dead_prefix(&self) -> String {
        format!("{}dead:", self.prefix)
    }

    /// A SCAN pattern matching every dead-letter list.
    pub fn dead_pattern(&self) -> String {
        glob_prefix(&self.dead_prefix())
    }
}

/// Which key layout a deployment uses (`[delayer] layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Delayer 1.x's: one pool, global ids ([`Keys`]).
    #[default]
    Classic,
    /// Everything of a topic in one hash slot ([`TopicKeys`]).
    Topic,
}

/// The per-topic layout's names (PROTOCOL.md, "The per-topic layout"):
/// `<prefix>{<topic>}:<kind>`, so a topic's keys share a hash slot, plus two
/// index keys outside every topic's slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicKeys {
    prefix: String,
}

impl TopicKeys {
    /// Names under `prefix`, which must not contain `{` or `}` (it would
    /// move the hash tag; the config reader refuses it).
    pub fn new(prefix: impl Into<String>) -> Self {
        TopicKeys { prefix: prefix.into() }
    }

    /// The prefix every name starts with.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn of(&self, topic: &str, kind: &str) -> String {
        format!("{}{{{topic}}}:{kind}", self.prefix)
    }

    /// The topic's ZSET of waiting ids, scored by due time.
    pub fn pool(&self, topic: &str) -> String {
        self.of(topic, "pool")
    }

    /// The topic's LIST of ready ids.
    pub fn ready(&self, topic: &str) -> String {
        self.of(topic, "ready")
    }

    /// The topic's ZSET of reserved ids, scored by deadline (Unix ms).
    pub fn reserved(&self, topic: &str) -> String {
        self.of(topic, "reserved")
    }

    /// The topic's LIST of dead letters.
    pub fn dead(&self, topic: &str) -> String {
        self.of(topic, "dead")
    }

    /// What a job's HASH name puts before its id.
    pub fn bucket_prefix(&self, topic: &str) -> String {
        self.of(topic, "job:")
    }

    /// The HASH of one job of the topic.
    pub fn bucket(&self, topic: &str, id: &str) -> String {
        format!("{}{id}", self.bucket_prefix(topic))
    }

    /// The topic's LIST of ids whose bucket could not be handled.
    pub fn malformed(&self, topic: &str) -> String {
        self.of(topic, "malformed")
    }

    /// The topic's counter reservation receipts are taken from.
    pub fn receipt_seq(&self, topic: &str) -> String {
        self.of(topic, "receipt_seq")
    }

    /// The topic's flow control HASH (the classic layout's `flow:<topic>`).
    pub fn flow(&self, topic: &str) -> String {
        self.of(topic, "flow")
    }

    /// The LIST the topic's consumers wait on while it is paused.
    pub fn gate(&self, topic: &str) -> String {
        self.of(topic, "gate")
    }

    /// The topic's HASH of ended reservations per outcome (fields as the
    /// classic layout's `<prefix>outcomes`: `acked:<topic>` -> count).
    pub fn outcomes(&self, topic: &str) -> String {
        self.of(topic, "outcomes")
    }

    /// The index ZSET: topic -> the earliest time it needs the server.
    pub fn due(&self) -> String {
        format!("{}due", self.prefix)
    }

    /// The SET of every topic used (the classic layout's name, same meaning).
    pub fn topics(&self) -> String {
        format!("{}topics", self.prefix)
    }

    /// The wake-up channel (the classic layout's).
    pub fn wake(&self) -> String {
        format!("{}wake", self.prefix)
    }

    /// A SCAN pattern matching every topic's pool.
    pub fn pool_pattern(&self) -> String {
        let mut pattern = glob_prefix(&format!("{}{{", self.prefix));
        pattern.push_str("}:pool");
        pattern
    }

    /// The topic of a pool's name, as [`TopicKeys::pool_pattern`] finds them.
    pub fn topic_of_pool<'a>(&self, key: &'a str) -> Option<&'a str> {
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix('{')?;
        let topic = rest.strip_suffix("}:pool")?;
        (!topic.is_empty() && !topic.contains(['{', '}'])).then_some(topic)
    }

    /// A SCAN pattern matching every topic's flow hash (`delayer migrate`).
    pub fn flow_pattern(&self) -> String {
        let mut pattern = glob_prefix(&format!("{}{{", self.prefix));
        pattern.push_str("}:flow");
        pattern
    }

    /// The topic of a key [`Self::flow_pattern`] matched, if it is one's.
    pub fn topic_of_flow<'a>(&self, key: &'a str) -> Option<&'a str> {
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix('{')?;
        let topic = rest.strip_suffix("}:flow")?;
        (!topic.is_empty() && !topic.contains(['{', '}'])).then_some(topic)
    }
}

/// The names a client's calls pass their scripts, in its layout: the
/// classic layout's shared keys, or the topic's own (PROTOCOL.md,
/// "Operations in the per-topic layout"). Every call names its topic; the
/// classic layout ignores it where its key is shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Names {
    /// Delayer 1.x's layout.
    Classic(Keys),
    /// The per-topic layout.
    Topic(TopicKeys),
}

impl Names {
    /// The names under `prefix` in `layout`.
    pub fn new(prefix: &str, layout: Layout) -> Names {
        match layout {
            Layout::Classic => Names::Classic(Keys::new(prefix)),
            Layout::Topic => Names::Topic(TopicKeys::new(prefix)),
        }
    }

    /// The same layout's names under another prefix.
    pub fn with_prefix(&self, prefix: &str) -> Names {
        Names::new(prefix, self.layout())
    }

    /// Which layout these are.
    pub fn layout(&self) -> Layout {
        match self {
            Names::Classic(_) => Layout::Classic,
            Names::Topic(_) => Layout::Topic,
        }
    }

    /// The prefix every key starts with.
    pub fn prefix(&self) -> &str {
        match self {
            Names::Classic(k) => k.prefix(),
            Names::Topic(k) => k.prefix(),
        }
    }

    /// The ZSET of `topic`'s waiting ids.
    pub fn pool(&self, topic: &str) -> String {
        match self {
            Names::Classic(k) => k.job_pool(),
            Names::Topic(k) => k.pool(topic),
        }
    }

    /// What a bucket name of `topic` puts before the id.
    pub fn bucket_prefix(&self, topic: &str) -> String {
        match self {
            Names::Classic(k) => k.bucket_prefix(),
            Names::Topic(k) => k.bucket_prefix(topic),
        }
    }

    /// The HASH of job `id` of `topic`.
    pub fn bucket(&self, topic: &str, id: &str) -> String {
        format!("{}{id}", self.bucket_prefix(topic))
    }

    /// [`Names::bucket`] for an id read back from Redis as raw bytes.
    pub fn bucket_bytes(&self, topic: &str, id: &[u8]) -> Vec<u8> {
        let mut key = self.bucket_prefix(topic).into_bytes();
        key.extend_from_slice(id);
        key
    }

    /// The LIST of `topic`'s ready ids.
    pub fn ready(&self, topic: &str) -> String {
        match self {
            Names::Classic(k) => k.ready_queue(topic),
            Names::Topic(k) => k.ready(topic),
        }
    }

    /// The LIST ids that cannot be handled are parked on.
    pub fn malformed(&self, topic: &str) -> String {
        match self {
            Names::Classic(k) => k.malformed(),
            Names::Topic(k) => k.malformed(topic),
        }
    }

    /// The ZSET of `topic`'s reserved ids (deadlines, Unix ms).
    pub fn reserved(&self, topic: &str) -> String {
        match self {
            Names::Classic(k) => k.reserved(),
            Names::Topic(k) => k.reserved(topic),
        }
    }

    /// The counter `topic`'s receipts are taken from.
    pub fn receipt_seq(&self, topic: &str) -> String {
        match self {
            Names::Classic(k) => k.receipt_seq(),
            Names::Topic(k) => k.receipt_seq(topic),
        }
    }

    /// The HASH of `topic`'s flow control (paused or not), which pop, take
    /// and reserve read before they hand anything out.
    pub fn flow(&self, topic: &str) -> String {
        match self {
            Names::Classic(k) => k.flow(topic),
            Names::Topic(k) => k.flow(topic),
        }
    }

    /// The LIST `topic`'s consumers wait on while it is paused.
    pub fn gate(&self, topic: &str) -> String {
        match self {
            Names::Classic(k) => k.flow_gate(topic),
            Names::Topic(k) => k.gate(topic),
        }
    }

    /// flow.lua's keys after the flow hash and the gate: the classic
    /// layout's `flow_topics` and the topic's flow pool (where its held jobs
    /// are), flow_topic.lua's the topic's pool.
    pub fn flow_held(&self, topic: &str) -> Vec<String> {
        match self {
            Names::Classic(k) => vec![k.flow_topics(), k.flow_pool(topic)],
            Names::Topic(k) => vec![k.pool(topic)],
        }
    }

    /// What a classic flow pool's key starts with, "" in the per-topic
    /// layout (where a held job simply stays in its topic's pool): scripts
    /// shared by both layouts look there only when it is given.
    pub fn flow_pool_prefix(&self) -> String {
        match self {
            Names::Classic(k) => k.flow_pool_prefix(),
            Names::Topic(_) => String::new(),
        }
    }

    /// The LIST of `topic`'s dead letters.
    pub fn dead(&self, topic: &str) -> String {
        match self {
            Names::Classic(k) => k.dead(topic),
            Names::Topic(k) => k.dead(topic),
        }
    }

    /// The HASH `topic`'s ended reservations are counted in (ack.lua,
    /// release.lua and reserve.lua's acks write it; the server exports it).
    pub fn outcomes(&self, topic: &str) -> String {
        match self {
            Names::Classic(k) => k.outcomes(),
            Names::Topic(k) => k.outcomes(topic),
        }
    }

    /// The HASHes counting the ended reservations of `topics`: the classic
    /// layout's one, or each topic's.
    pub fn outcome_hashes(&self, topics: &[String]) -> Vec<String> {
        match self {
            Names::Classic(k) => vec![k.outcomes()],
            Names::Topic(k) => topics.iter().map(|t| k.outcomes(t)).collect(),
        }
    }

    /// The per-topic counts of waiting jobs, which the classic scripts of a
    /// layout pair take; the per-topic layout has none (a topic's pool is its
    /// count) and its `*_topic.lua` scripts take no such key.
    pub fn scheduled_count(&self) -> Option<String> {
        match self {
            Names::Classic(k) => Some(k.scheduled_count()),
            Names::Topic(_) => None,
        }
    }

    /// The wake channel the scripts announce on (PROTOCOL.md, "The wake
    /// channel"), the same name in both layouts.
    pub fn wake(&self) -> String {
        format!("{}wake", self.prefix())
    }

    /// `classic` in the classic layout, `topic` in the per-topic one: a
    /// script whose work differs by layout is a pair (crate::scripts), and
    /// this is the one place that chooses.
    pub fn pick<T>(&self, classic: T, topic: T) -> T {
        match self {
            Names::Classic(_) => classic,
            Names::Topic(_) => topic,
        }
    }

    /// release.lua's `KEYS[4]` and `ARGV[2]` for `topic` (the scheduled
    /// counts and the dead-letter prefix), or release_topic.lua's `KEYS[4]`
    /// (the topic's dead list) and no such argument.
    pub fn release_dead(&self, topic: &str) -> (String, Option<String>) {
        match self {
            Names::Classic(k) => (k.scheduled_count(), Some(k.dead_prefix())),
            Names::Topic(k) => (k.dead(topic), None),
        }
    }
}

impl Names {
    /// Refuses a prefix with a brace in the per-topic layout (it would move
    /// every name's hash tag).
    pub fn check_prefix(&self) -> Result<()> {
        match self {
            Names::Topic(k) if k.prefix.contains(['{', '}']) => Err(Invalid(format!(
                "key prefix {:?} contains a brace, which the per-topic layout cannot use",
                k.prefix
            ))),
            _ => Ok(()),
        }
    }

    /// The topic of a call that names its job by id: any ("") in the classic
    /// layout, where ids are global; required in the per-topic layout, where
    /// the error says which call to make (`instead`).
    pub fn id_topic<'a>(&self, topic: Option<&'a str>, call: &str, instead: &str) -> Result<&'a str> {
        match (self, topic) {
            // The classic layout names no key by it: a topic read back from
            // Redis (any 1.x name) is fine.
            (Names::Classic(_), topic) => Ok(topic.unwrap_or("")),
            (Names::Topic(_), Some(topic)) => check_topic(self, topic).map(|()| topic),
            (Names::Topic(_), None) => {
                Err(Invalid(format!("{call} needs the topic in the per-topic layout: use {instead}")))
            }
        }
    }

    /// Whether one script call on `topic` may also write jobs of `other`
    /// (`None`: a job of unknown topic, taken as one of `topic`): always in
    /// the classic layout, whose keys are shared; only of `topic` itself in
    /// the per-topic layout, where a call touches one topic's hash slot.
    pub fn one_call(&self, topic: &str, other: Option<&str>) -> bool {
        matches!(self, Names::Classic(_)) || other.is_none_or(|other| other == topic)
    }
}

/// Checks a topic: a name, and in the per-topic layout free of the braces
/// that would move its hash tag (the SDK's calls check it themselves; tools
/// that read keys directly call this).
pub fn check_topic(names: &Names, topic: &str) -> Result<()> {
    validate::name("topic", topic)?;
    names.check_prefix()?;
    if matches!(names, Names::Topic(_)) && topic.contains(['{', '}']) {
        return Err(Invalid(format!("topic {topic:?} may not contain \"{{\" or \"}}\" in the per-topic layout")));
    }
    Ok(())
}

/// The outcomes counted in [`Names::outcomes`]: each field is
/// `<outcome>:<topic>`. `released` is a retry; `dead_lettered` every job sent
/// to dead letters (buried or out of attempts), `buried` those buried.
pub const OUTCOMES: [&str; 4] = ["acked", "released", "buried", "dead_lettered"];

/// `prefix*`, with the prefix's glob characters escaped.
fn glob_prefix(prefix: &str) -> String {
    let mut pattern = String::new();
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_layout_names_share_the_topics_hash_tag() {
        let k = TopicKeys::new("shop:");
        assert_eq!(k.pool("mail"), "shop:{mail}:pool");
        assert_eq!(k.ready("mail"), "shop:{mail}:ready");
        assert_eq!(k.reserved("mail"), "shop:{mail}:reserved");
        assert_eq!(k.dead("mail"), "shop:{mail}:dead");
        assert_eq!(format!("{}42", k.bucket_prefix("mail")), "shop:{mail}:job:42");
        assert_eq!(k.bucket("mail", "42"), "shop:{mail}:job:42");
        assert_eq!(k.malformed("mail"), "shop:{mail}:malformed");
        assert_eq!(k.receipt_seq("mail"), "shop:{mail}:receipt_seq");
        assert_eq!(k.outcomes("mail"), "shop:{mail}:outcomes");
        assert_eq!((k.due(), k.topics()), ("shop:due".to_string(), "shop:topics".to_string()));
        assert_eq!(TopicKeys::new("a*b:").pool_pattern(), "a\\*b:{*}:pool");
        assert_eq!(k.topic_of_pool("shop:{mail}:pool"), Some("mail"));
        assert_eq!(k.topic_of_pool("shop:{}:pool"), None);
        assert_eq!(k.topic_of_pool("shop:{mail}:ready"), None);
    }

    #[test]
    fn default_layout_is_delayer_1x() {
        let k = Keys::default();
        assert_eq!(k.job_pool(), "delayer:job_pool");
        assert_eq!(k.job_bucket("42"), "delayer:job_bucket:42");
        assert_eq!(k.ready_queue("order"), "delayer:ready_queue:order");
        assert_eq!(k.malformed(), "delayer:malformed");
        assert_eq!(k.reserved(), "delayer:reserved");
        assert_eq!(k.dead("order"), "delayer:dead:order");
        assert_eq!(k.receipt_seq(), "delayer:receipt_seq");
        assert_eq!(k.scheduled_count(), "delayer:scheduled_count");
        assert_eq!(k.topics(), "delayer:topics");
        assert_eq!(k.outcomes(), "delayer:outcomes");
        assert_eq!(k.dead_prefix(), "delayer:dead:");
    }

    #[test]
    fn prefix_is_prepended_as_is() {
        let k = Keys::new("shop:d:");
        assert_eq!(k.job_pool(), "shop:d:job_pool");
        assert_eq!(k.ready_queue("t"), "shop:d:ready_queue:t");
        assert_eq!(Keys::new("a*[b]:").ready_queue_pattern(), "a\\*\\[b\\]:ready_queue:*");
    }
}
