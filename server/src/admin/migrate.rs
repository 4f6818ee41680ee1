//! `delayer migrate --to topic|classic`: moves every job to the other key
//! layout on a running system (PROTOCOL.md, "Switching layouts").
//!
//! Each topic's flow control (pause, rate limit) is copied first, once.
//! Then jobs move topic by topic and state by state (waiting, reserved,
//! ready, dead; a classic flow pool's held jobs are waiting ones), each with
//! its bucket, by lua/migrate.lua, whose calls are atomic: pushes, pops, moves and acks of either layout may run meanwhile, and a job
//! is always in exactly one layout. Towards the per-topic layout each topic's
//! index entry is written as a client's would be. Passes repeat while they
//! move something; what is left in the old layout is then counted and
//! explained: a topic with a brace (the per-topic layout cannot name it), an
//! id the destination already holds (towards the classic layout, ids are
//! global), entries without a job (the old layout's server drops or parks
//! them), and jobs still being pushed in the old layout (run it again once
//! every client uses the new one).

use delayer_protocol::connection::Conn as Connection;
use delayer_protocol::keys::{Keys, TopicKeys};
use delayer_protocol::numbers;
use redis::{Commands, RedisResult, Script, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

/// `migrate.lua` (its header states its KEYS and ARGV).
static MIGRATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/migrate.lua")));

/// Ids read, and moved, per call.
const BATCH: usize = 500;

/// What a run moved and left.
#[derive(Debug, Default)]
pub struct Report {
    /// Jobs moved, per state.
    pub moved: BTreeMap<&'static str, u64>,
    /// Ids left where they were: (topic, id) the destination already holds.
    pub kept: BTreeSet<(String, String)>,
    /// Topics the per-topic layout cannot name.
    pub unnamable: BTreeSet<String>,
    /// Entries left in the old layout's keys after the last pass.
    pub remaining: u64,
}

impl Report {
    /// Nothing left in the old layout.
    pub fn complete(&self) -> bool {
        self.remaining == 0
    }

    /// What to do about what was left (an incomplete run): jobs no run can
    /// move must be ended in the old layout first; the rest move next time.
    pub fn advice(&self) -> &'static str {
        if self.unnamable.is_empty() && self.kept.is_empty() {
            "some jobs were left where they were (above): run delayer migrate again once every client uses the new layout"
        } else {
            "some jobs cannot be moved (above): no run will move them; let them finish, or remove them, in the old \
             layout (README, \"Switching layouts\"), then run delayer migrate again"
        }
    }

    fn total(&self) -> u64 {
        self.moved.values().sum()
    }

    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for state in ["scheduled", "reserved", "ready", "dead"] {
            out.push_str(&format!("moved {state:<10} {}\n", self.moved.get(state).unwrap_or(&0)));
        }
        for topic in &self.unnamable {
            out.push_str(&format!("left topic {topic:?}: the per-topic layout cannot name a topic with a brace\n"));
        }
        for (topic, id) in &self.kept {
            out.push_str(&format!("left job {id:?} of topic {topic:?}: the new layout holds a job with this id\n"));
        }
        if self.remaining > 0 {
            out.push_str(&format!(
                "left {} entries in the old layout: the jobs above, entries without a job (its server drops or \
                 parks them), or jobs pushed there meanwhile (run again once every client uses the new layout)\n",
                self.remaining
            ));
        }
        out
    }
}

/// Passes at most: each after the first only finds what arrived meanwhile.
const PASSES: usize = 10;

/// Why a cluster has nothing to migrate.
pub const ON_A_CLUSTER: &str =
    "delayer migrate moves jobs on one Redis (standalone or sentinel); a cluster has the per-topic layout only";

/// Moves every job under `prefix` into the `to` layout.
pub fn run(conn: &mut Connection, prefix: &str, to: delayer::Layout) -> RedisResult<Report> {
    if conn.is_cluster() {
        // A cluster runs the per-topic layout only: there is nothing to move.
        return Err(redis::RedisError::from((redis::ErrorKind::Client, ON_A_CLUSTER)));
    }
    let (classic, topic) = (Keys::new(prefix), TopicKeys::new(prefix));
    let mut report = Report::default();
    copy_flows(conn, &classic, &topic, to)?;
    for _ in 0..PASSES {
        let before = report.total();
        match to {
            delayer::Layout::Topic => to_topic(conn, &classic, &topic, &mut report)?,
            delayer::Layout::Classic => to_classic(conn, &classic, &topic, &mut report)?,
        }
        if report.total() == before {
            break;
        }
    }
    report.remaining = match to {
        delayer::Layout::Topic => left_in_classic(conn, &classic)?,
        delayer::Layout::Classic => left_in_topic(conn, &topic)?,
    };
    Ok(report)
}

/// The two sides of one move: keys and bucket prefixes.
struct Sides<'a> {
    from: String,
    to: String,
    from_buckets: String,
    to_buckets: String,
    /// The classic pool's counts (migrate.lua's KEYS[3], sent with every
    /// call, so the call has one shape), and whether they lose ("from") or
    /// gain ("to") the jobs: "" when neither side is the classic pool.
    counts: &'a str,
    side: &'static str,
}

/// One migrate.lua call: `ids` of a ZSET, or (`None`) up to [`BATCH`] off a
/// list. Counts what moved; returns whether a list may hold more to move.
fn call(
    conn: &mut Connection,
    topic: &str,
    sides: &Sides,
    ids: Option<&[String]>,
    state: &'static str,
    report: &mut Report,
) -> RedisResult<bool> {
    let mut inv = MIGRATE.prepare_invoke();
    inv.key(&sides.from).key(&sides.to).key(sides.counts);
    inv.arg(&sides.from_buckets).arg(&sides.to_buckets).arg(topic);
    let side = sides.side;
    match ids {
        Some(ids) => inv.arg("zset").arg(side).arg(ids),
        None => inv.arg("list").arg(side).arg(BATCH),
    };
    let (moved, skipped, kept): (u64, u64, Vec<String>) = inv.invoke(conn)?;
    *report.moved.entry(state).or_default() += moved;
    // A list call stops at a kept id (it would meet it again next): so does its caller.
    let more = ids.is_none() && kept.is_empty() && moved + skipped >= BATCH as u64;
    report.kept.extend(kept.into_iter().map(|id| (topic.to_string(), id)));
    Ok(more)
}

/// Moves a whole list (ready queue or dead letters) of `topic`.
fn move_list(
    conn: &mut Connection,
    topic: &str,
    sides: &Sides,
    state: &'static str,
    report: &mut Report,
) -> RedisResult<()> {
    while call(conn, topic, sides, None, state, report)? {}
    Ok(())
}

/// Every member of a ZSET, batch by batch (ZSCAN: members that stay are
/// seen at least once however the set changes meanwhile).
fn zscan_batches(
    conn: &mut Connection,
    zset: &str,
    mut each: impl FnMut(&mut Connection, Vec<String>) -> RedisResult<()>,
) -> RedisResult<()> {
    let mut cursor: u64 = 0;
    loop {
        let (next, flat): (u64, Vec<String>) =
            redis::cmd("ZSCAN").arg(zset).arg(cursor).arg("COUNT").arg(BATCH).query(conn)?;
        // member, score, member, score, ...
        let ids: Vec<String> = flat.into_iter().step_by(2).collect();
        if !ids.is_empty() {
            each(conn, ids)?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

/// The per-topic layout's index, as a client writes it after its call.
fn index(conn: &mut Connection, topic_keys: &TopicKeys, topic: &str) -> RedisResult<()> {
    let pool: Vec<(String, f64)> = conn.zrange_withscores(topic_keys.pool(topic), 0, 0)?;
    let reserved: Vec<(String, f64)> = conn.zrange_withscores(topic_keys.reserved(topic), 0, 0)?;
    // Scores read within 1970..9999 (`delayer_protocol::numbers`): an `inf` score
    // is indexed as the end of 9999, never published as `inf`.
    let due = pool.first().and_then(|(_, s)| numbers::time_secs(*s).value);
    let deadline = reserved.first().and_then(|(_, ms)| numbers::time_millis(*ms).value);
    let first = due.into_iter().chain(deadline).map(numbers::Time::secs).reduce(f64::min);
    let mut pipe = redis::pipe();
    pipe.sadd(topic_keys.topics(), topic).ignore();
    if let Some(first) = first {
        pipe.cmd("ZADD").arg(topic_keys.due()).arg("LT").arg(first).arg(topic).ignore();
        pipe.publish(topic_keys.wake(), first).ignore();
    }
    pipe.query(conn)
}

/// The key's type ("none" when it does not exist).
fn kind(conn: &mut Connection, key: &str) -> RedisResult<String> {
    redis::cmd("TYPE").arg(key).query(conn)
}

/// Copies one flow-control hash (pause, rate limit) to the other layout's
/// name for it: field by field, the destination's other fields kept. A key
/// of another type is left alone. Returns the fields copied.
fn copy_flow(conn: &mut Connection, from: &str, to: &str) -> RedisResult<BTreeMap<String, String>> {
    if kind(conn, from)? != "hash" {
        return Ok(BTreeMap::new());
    }
    let fields: BTreeMap<String, String> = conn.hgetall(from)?;
    if !fields.is_empty() {
        // The destination becomes the source's state, not a merge: a pause
        // left there by an earlier migration must not outlive a resume here.
        let pairs: Vec<(&String, &String)> = fields.iter().collect();
        let _: () = redis::pipe().atomic().del(to).hset_multiple(to, &pairs).query(conn)?;
    }
    Ok(fields)
}

/// Every classic flow pool (ZSET `<prefix>flow_pool:<topic>`) and its topic.
fn flow_pools(conn: &mut Connection, classic: &Keys) -> RedisResult<Vec<(String, String)>> {
    let prefix = classic.flow_pool_prefix();
    let keys: Vec<String> = conn.scan_match(classic.flow_pool_pattern())?.collect::<RedisResult<_>>()?;
    let mut pools = Vec::new();
    for key in keys {
        if let Some(t) = key.strip_prefix(&prefix).filter(|t| !t.is_empty()).map(str::to_string) {
            if kind(conn, &key)? == "zset" {
                pools.push((key, t));
            }
        }
    }
    Ok(pools)
}

/// Copies every topic's flow control to the `to` layout, before any job
/// moves (a paused topic stays paused: its held jobs must not reach a
/// consumer of the new layout before its pause does). Towards the classic
/// layout a topic under control joins `flow_topics`, where the classic mover
/// looks. The destination's hash becomes the source's (a stale `paused` of an
/// earlier migration back and forth does not survive a resume).
fn copy_flows(conn: &mut Connection, classic: &Keys, topic_keys: &TopicKeys, to: delayer::Layout) -> RedisResult<()> {
    if to == delayer::Layout::Topic {
        let flow_prefix = classic.flow("");
        let flows: Vec<String> = conn.scan_match(classic.flow_pattern())?.collect::<RedisResult<_>>()?;
        for key in flows {
            // A topic with a brace is reported with its jobs (to_topic).
            let Some(t) = key.strip_prefix(&flow_prefix).filter(|t| !t.is_empty() && !t.contains(['{', '}'])) else {
                continue;
            };
            copy_flow(conn, &key, &topic_keys.flow(t))?;
        }
    } else {
        let flows: Vec<String> = conn.scan_match(topic_keys.flow_pattern())?.collect::<RedisResult<_>>()?;
        for key in flows {
            let Some(t) = topic_keys.topic_of_flow(&key) else { continue };
            let fields = copy_flow(conn, &key, &classic.flow(t))?;
            if fields.contains_key("paused") || fields.contains_key("per_second") {
                let _: () = conn.sadd(classic.flow_topics(), t)?;
            }
        }
    }
    Ok(())
}

fn to_topic(conn: &mut Connection, classic: &Keys, topic_keys: &TopicKeys, report: &mut Report) -> RedisResult<()> {
    let counts = classic.scheduled_count();
    let mut touched = BTreeSet::new();
    // A topic's held jobs (set aside by the classic mover): waiting jobs of
    // its pool, still counted in the scheduled counts.
    for (pool, t) in flow_pools(conn, classic)? {
        if t.contains(['{', '}']) {
            report.unnamable.insert(t);
            continue;
        }
        let sides = Sides {
            from: pool.clone(),
            to: topic_keys.pool(&t),
            from_buckets: classic.bucket_prefix(),
            to_buckets: topic_keys.bucket_prefix(&t),
            counts: &counts,
            side: "from",
        };
        zscan_batches(conn, &pool, |conn, ids| call(conn, &t, &sides, Some(&ids), "scheduled", report).map(|_| ()))?;
        touched.insert(t);
    }
    // The shared ZSETs: each batch's ids grouped by their bucket's topic.
    for (zset, state) in [(classic.job_pool(), "scheduled"), (classic.reserved(), "reserved")] {
        zscan_batches(conn, &zset, |conn, ids| {
            let mut pipe = redis::pipe();
            ids.iter().for_each(|id| {
                pipe.cmd("HGET").arg(classic.job_bucket(id)).arg("topic");
            });
            let owners: Vec<Value> = pipe.ignore_errors().query(conn)?;
            let mut by_topic: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (id, owner) in ids.into_iter().zip(owners) {
                match redis::from_redis_value::<Option<String>>(owner).ok().flatten() {
                    Some(t) if t.contains(['{', '}']) => {
                        report.unnamable.insert(t);
                    }
                    Some(t) if !t.is_empty() => by_topic.entry(t).or_default().push(id),
                    // No bucket, or no topic: the classic server drops or parks it.
                    _ => {}
                }
            }
            for (t, ids) in &by_topic {
                let sides = Sides {
                    from: zset.clone(),
                    to: if state == "scheduled" { topic_keys.pool(t) } else { topic_keys.reserved(t) },
                    from_buckets: classic.bucket_prefix(),
                    to_buckets: topic_keys.bucket_prefix(t),
                    counts: &counts,
                    side: if state == "scheduled" { "from" } else { "" },
                };
                call(conn, t, &sides, Some(ids), state, report)?;
                touched.insert(t.clone());
            }
            Ok(())
        })?;
    }
    // The per-topic lists: every ready queue and dead-letter list.
    for (pattern, prefix, state) in [
        (classic.ready_queue_pattern(), classic.ready_queue_prefix(), "ready"),
        (classic.dead_pattern(), classic.dead_prefix(), "dead"),
    ] {
        let lists: Vec<String> = conn.scan_match(&pattern)?.collect::<RedisResult<_>>()?;
        for list in lists {
            let Some(t) = list.strip_prefix(&prefix) else { continue };
            if t.contains(['{', '}']) {
                report.unnamable.insert(t.to_string());
                continue;
            }
            let to = if state == "ready" { topic_keys.ready(t) } else { topic_keys.dead(t) };
            let sides = Sides {
                from: list.clone(),
                to,
                from_buckets: classic.bucket_prefix(),
                to_buckets: topic_keys.bucket_prefix(t),
                counts: &counts,
                side: "",
            };
            move_list(conn, t, &sides, state, report)?;
            touched.insert(t.to_string());
        }
    }
    for t in &touched {
        index(conn, topic_keys, t)?;
    }
    Ok(())
}

fn to_classic(conn: &mut Connection, classic: &Keys, topic_keys: &TopicKeys, report: &mut Report) -> RedisResult<()> {
    let counts = classic.scheduled_count();
    for t in &topics_of(conn, topic_keys)? {
        for (zset, to, state) in [
            (topic_keys.pool(t), classic.job_pool(), "scheduled"),
            (topic_keys.reserved(t), classic.reserved(), "reserved"),
        ] {
            let sides = Sides {
                from: zset.clone(),
                to,
                from_buckets: topic_keys.bucket_prefix(t),
                to_buckets: classic.bucket_prefix(),
                counts: &counts,
                side: if state == "scheduled" { "to" } else { "" },
            };
            zscan_batches(conn, &zset, |conn, ids| call(conn, t, &sides, Some(&ids), state, report).map(|_| ()))?;
        }
        for (from, to, state) in
            [(topic_keys.ready(t), classic.ready_queue(t), "ready"), (topic_keys.dead(t), classic.dead(t), "dead")]
        {
            let sides = Sides {
                from,
                to,
                from_buckets: topic_keys.bucket_prefix(t),
                to_buckets: classic.bucket_prefix(),
                counts: &counts,
                side: "",
            };
            move_list(conn, t, &sides, state, report)?;
        }
        // stats.lua learns topics from this set (the classic mover, from its batches).
        let _: () = conn.sadd(classic.topics(), t)?;
    }
    Ok(())
}

/// Every topic of the per-topic layout: the known ones, and any pool the key
/// space holds.
fn topics_of(conn: &mut Connection, topic_keys: &TopicKeys) -> RedisResult<BTreeSet<String>> {
    let mut topics: BTreeSet<String> = conn.smembers(topic_keys.topics())?;
    let pools: Vec<String> = conn.scan_match(topic_keys.pool_pattern())?.collect::<RedisResult<_>>()?;
    topics.extend(pools.iter().filter_map(|p| topic_keys.topic_of_pool(p)).map(str::to_string));
    Ok(topics)
}

/// Entries left in the classic layout's job keys.
fn left_in_classic(conn: &mut Connection, classic: &Keys) -> RedisResult<u64> {
    let mut left: u64 = conn.zcard(classic.job_pool())?;
    left += conn.zcard::<_, u64>(classic.reserved())?;
    for (pool, _) in flow_pools(conn, classic)? {
        left += conn.zcard::<_, u64>(&pool)?;
    }
    for pattern in [classic.ready_queue_pattern(), classic.dead_pattern()] {
        let lists: Vec<String> = conn.scan_match(&pattern)?.collect::<RedisResult<_>>()?;
        for list in lists {
            left += conn.llen::<_, u64>(&list)?;
        }
    }
    Ok(left)
}

/// Entries left in the per-topic layout's job keys.
fn left_in_topic(conn: &mut Connection, topic_keys: &TopicKeys) -> RedisResult<u64> {
    let mut left = 0;
    for t in &topics_of(conn, topic_keys)? {
        left += conn.zcard::<_, u64>(topic_keys.pool(t))? + conn.zcard::<_, u64>(topic_keys.reserved(t))?;
        left += conn.llen::<_, u64>(topic_keys.ready(t))? + conn.llen::<_, u64>(topic_keys.dead(t))?;
    }
    Ok(left)
}
