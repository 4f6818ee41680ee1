//! The guard rule of the clients' scripts (PROTOCOL.md, "Operations"), on a
//! real redis-server: a key of the wrong type makes a script fail before
//! its first write, or the script completes; an id it took is never lost
//! to one. One case per script that could lose an id or fail half done.

use delayer_protocol::keys::{Keys, Names};
use delayer_protocol::{calls, scripts};
use redis::{Commands, Value};
use testkit::RedisServer;

const POOL: &str = "delayer:job_pool";
const READY: &str = "delayer:ready_queue:mail";
const MALFORMED: &str = "delayer:malformed";
const RESERVED: &str = "delayer:reserved";
const BUCKETS: &str = "delayer:job_bucket:";
const FLOW: &str = "delayer:flow:mail";

/// The classic layout's names (the consts above are a few of them).
fn names() -> Names {
    Names::Classic(Keys::default())
}

/// Redis, with the malformed list a string, and "mail"'s ready queue
/// holding a malformed id ("nameless", first out) then a live job ("live").
fn ready_with_a_malformed_id() -> (RedisServer, redis::Connection) {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () = conn.set(MALFORMED, "not a list").expect("SET");
    let _: () = conn.hset("delayer:job_bucket:nameless", "body", "x").expect("HSET");
    let _: () = conn.hset_multiple("delayer:job_bucket:live", &[("topic", "mail"), ("body", "hi")]).expect("HSET");
    let _: () = conn.rpush(READY, &["live", "nameless"]).expect("RPUSH");
    (redis, conn)
}

/// The malformed id went back to the pool, the malformed key is untouched.
fn assert_sent_back(conn: &mut redis::Connection) {
    let back: Option<f64> = conn.zscore(POOL, "nameless").expect("ZSCORE");
    assert!(back.is_some(), "the malformed id was lost");
    let kept: String = conn.get(MALFORMED).expect("GET");
    assert_eq!(kept, "not a list");
    assert!(conn.exists::<_, bool>("delayer:job_bucket:nameless").expect("EXISTS"), "its bucket is kept");
}

#[test]
fn pop_sends_a_malformed_id_back_to_the_pool_when_it_cannot_park_it() {
    let (_redis, mut conn) = ready_with_a_malformed_id();
    let job: Vec<String> = calls::pop(&names(), "mail").invoke(&mut conn).expect("pop");
    assert_eq!(job, ["live", "mail", "hi", ""]);
    assert_sent_back(&mut conn);
}

#[test]
fn take_sends_a_malformed_id_back_to_the_pool_when_it_cannot_park_it() {
    let (_redis, mut conn) = ready_with_a_malformed_id();
    let id: String = conn.rpop(READY, None).expect("RPOP, as bpop's BRPOP");
    let reply: Value = calls::take(&names(), "mail", id.as_bytes()).invoke(&mut conn).expect("take");
    assert_eq!(reply, Value::Nil);
    assert_sent_back(&mut conn);
}

#[test]
fn reserve_sends_a_malformed_id_back_to_the_pool_when_it_cannot_park_it() {
    let (_redis, mut conn) = ready_with_a_malformed_id();
    let job: Vec<Value> = calls::reserve(&names(), "mail", 30_000, None).invoke(&mut conn).expect("reserve");
    assert_eq!(job[0], Value::BulkString(b"live".to_vec()));
    assert_sent_back(&mut conn);
}

#[test]
fn reserve_many_fails_before_its_acks_when_the_queue_has_the_wrong_type() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () = conn.hset_multiple("delayer:job_bucket:done", &[("topic", "mail"), ("receipt", "7")]).expect("HSET");
    let _: () = conn.zadd(RESERVED, "done", 1).expect("ZADD");
    let _: () = conn.set(READY, "not a list").expect("SET");
    let acks: &[(&[u8], &str)] = &[(b"done", "7")];
    let err = calls::reserve(&names(), "mail", 30_000, Some((5, acks)))
        .invoke::<Value>(&mut conn)
        .expect_err("a queue of the wrong type");
    assert_eq!(err.code(), Some("WRONGTYPE"));
    assert!(conn.exists::<_, bool>("delayer:job_bucket:done").expect("EXISTS"), "the ack ran before the failure");
}

/// The wait instruction a paused topic's hand-out scripts answer.
fn paused() -> Value {
    let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    Value::Array(vec![bulk("paused"), Value::Int(5000), bulk("delayer:flow_gate:mail")])
}

#[test]
fn take_puts_a_paused_topics_id_back_even_when_redis_is_out_of_memory() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () = conn.hset_multiple("delayer:job_bucket:a", &[("topic", "mail"), ("body", "hi")]).expect("HSET");
    let _: () = conn.rpush(READY, &["b", "a"]).expect("RPUSH");
    let _: () = conn.hset(FLOW, "paused", "1.000").expect("HSET");
    // Every write that adds memory is now refused (noeviction is the default).
    let _: () = redis::cmd("CONFIG").arg("SET").arg("maxmemory").arg(1).query(&mut conn).expect("CONFIG SET");
    let refused = redis::cmd("EVAL")
        .arg("return redis.call('RPUSH', KEYS[1], 'x')")
        .arg(1)
        .arg(READY)
        .query::<Value>(&mut conn)
        .expect_err("a script whose first write adds memory");
    assert!(refused.to_string().contains("OOM"), "{refused}");
    let id: String = conn.rpop(READY, None).expect("RPOP, as bpop's BRPOP");
    let reply: Value = calls::take(&names(), "mail", id.as_bytes()).invoke(&mut conn).expect("take");
    assert_eq!(reply, paused());
    let ready: Vec<String> = conn.lrange(READY, 0, -1).expect("LRANGE");
    assert_eq!(ready, ["b", "a"], "the id is back at the right end, where BRPOP took it");
    assert!(conn.exists::<_, bool>("delayer:job_bucket:a").expect("EXISTS"), "its bucket is kept");
}

#[test]
fn a_flow_hash_of_the_wrong_type_fails_closed_and_loses_no_id() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () = conn.hset_multiple("delayer:job_bucket:a", &[("topic", "mail"), ("body", "hi")]).expect("HSET");
    let _: () = conn.rpush(READY, "a").expect("RPUSH");
    let _: () = conn.set(FLOW, "not a hash").expect("SET");
    let err = calls::pop(&names(), "mail").invoke::<Value>(&mut conn).expect_err("pop");
    assert_eq!(err.code(), Some("WRONGTYPE"));
    assert!(err.to_string().contains(FLOW), "the error names the key: {err}");
    let err = calls::reserve(&names(), "mail", 30_000, None).invoke::<Value>(&mut conn).expect_err("reserve");
    assert!(err.to_string().contains(FLOW), "{err}");
    let id: String = conn.rpop(READY, None).expect("RPOP");
    let err = calls::take(&names(), "mail", id.as_bytes()).invoke::<Value>(&mut conn).expect_err("take");
    assert!(err.to_string().contains(FLOW), "{err}");
    let ready: Vec<String> = conn.lrange(READY, 0, -1).expect("LRANGE");
    assert_eq!(ready, ["a"], "nothing handed out, nothing lost");
    // Acks alone (a batch that asks for no jobs) still pass.
    let _: () = conn.hset_multiple("delayer:job_bucket:done", &[("topic", "mail"), ("receipt", "7")]).expect("HSET");
    let _: () = conn.zadd(RESERVED, "done", 1).expect("ZADD");
    let acks: &[(&[u8], &str)] = &[(b"done", "7")];
    let reply: Value = calls::reserve(&names(), "mail", 30_000, Some((0, acks))).invoke(&mut conn).expect("acks");
    assert_eq!(reply, Value::Array(vec![Value::Array(vec![Value::Int(1)]), Value::Array(vec![])]));
}

#[test]
fn a_paused_reserve_many_acks_and_takes_nothing() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () = conn.hset_multiple("delayer:job_bucket:a", &[("topic", "mail"), ("body", "hi")]).expect("HSET");
    let _: () = conn.rpush(READY, "a").expect("RPUSH");
    let _: () = conn.hset_multiple("delayer:job_bucket:done", &[("topic", "mail"), ("receipt", "7")]).expect("HSET");
    let _: () = conn.zadd(RESERVED, "done", 1).expect("ZADD");
    let _: () = conn.hset(FLOW, "paused", "1.000").expect("HSET");
    let _: () = conn.rpush("delayer:flow_gate:mail", "1").expect("RPUSH");
    let acks: &[(&[u8], &str)] = &[(b"done", "7")];
    let reply: Value = calls::reserve(&names(), "mail", 30_000, Some((5, acks))).invoke(&mut conn).expect("reserve");
    assert_eq!(reply, Value::Array(vec![Value::Array(vec![Value::Int(1)]), Value::Array(vec![]), paused()]));
    assert!(!conn.exists::<_, bool>("delayer:job_bucket:done").expect("EXISTS"), "acked");
    assert!(!conn.exists::<_, bool>("delayer:flow_gate:mail").expect("EXISTS"), "the gate is gone while paused");
    let ready: Vec<String> = conn.lrange(READY, 0, -1).expect("LRANGE");
    assert_eq!(ready, ["a"]);
    let one: Value = calls::pop(&names(), "mail").invoke(&mut conn).expect("pop");
    assert_eq!(one, paused());
}

#[test]
fn bury_fails_before_writing_when_the_dead_list_has_the_wrong_type() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () = conn.hset_multiple("delayer:job_bucket:j", &[("topic", "mail"), ("receipt", "3")]).expect("HSET");
    let _: () = conn.zadd(RESERVED, "j", 99).expect("ZADD");
    let _: () = conn.set("delayer:dead:mail", "x").expect("SET");
    let err = scripts::RELEASE
        .key(RESERVED)
        .key(POOL)
        .key(MALFORMED)
        .key("delayer:scheduled_count")
        .key("delayer:outcomes")
        .arg(BUCKETS)
        .arg("delayer:dead:")
        .arg("bury")
        .arg("held")
        .arg("j")
        .arg("3")
        .arg("")
        .arg("")
        .invoke::<Value>(&mut conn)
        .expect_err("a dead list of the wrong type");
    assert_eq!(err.code(), Some("WRONGTYPE"));
    assert!(err.to_string().contains("delayer:dead:mail"), "names the key: {err}");
    assert_eq!(conn.zscore::<_, _, Option<u64>>(RESERVED, "j").expect("ZSCORE"), Some(99), "still reserved");
    let receipt: Option<String> = conn.hget("delayer:job_bucket:j", "receipt").expect("HGET");
    assert_eq!(receipt.as_deref(), Some("3"));
}

#[test]
fn expiry_holds_what_it_can_neither_end_nor_park() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () = conn.set(MALFORMED, "x").expect("SET");
    // Reserved, past its deadline, and its bucket has no topic.
    let _: () = conn.hset("delayer:job_bucket:nameless", "receipt", "1").expect("HSET");
    let _: () = conn.zadd(RESERVED, "nameless", 1).expect("ZADD");
    let reply: Vec<Value> = scripts::RELEASE
        .key(RESERVED)
        .key(POOL)
        .key(MALFORMED)
        .key("delayer:scheduled_count")
        .key("delayer:outcomes")
        .arg(BUCKETS)
        .arg("delayer:dead:")
        .arg("backoff")
        .arg("expired")
        .arg(100)
        .invoke(&mut conn)
        .expect("expire");
    assert_eq!(reply[7], Value::Int(1), "held: {reply:?}");
    let deadline: Option<f64> = conn.zscore(RESERVED, "nameless").expect("ZSCORE");
    assert!(deadline.is_some_and(|d| d > 1.0), "kept, with a later deadline: {deadline:?}");
    let named = format!("{:?}", reply[8]);
    assert!(named.contains("delayer:malformed"), "names the key: {named}");
}

#[test]
fn remove_and_push_complete_when_the_count_hash_has_the_wrong_type() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () = conn.set("delayer:scheduled_count", "x").expect("SET");
    let due: String = scripts::PUSH
        .key(POOL)
        .key("delayer:job_bucket:j")
        .key("delayer:scheduled_count")
        .arg("j")
        .arg("mail")
        .arg("body")
        .arg(60_000)
        .arg(60_000)
        .arg(&["", "", "", "", "replace", "", ""][..])
        .invoke(&mut conn)
        .expect("push");
    assert!(due.contains('.'));
    let removed: i64 = scripts::REMOVE
        .key(POOL)
        .key("delayer:job_bucket:j")
        .key("delayer:scheduled_count")
        .arg("j")
        .invoke(&mut conn)
        .expect("remove");
    assert_eq!(removed, 1);
    assert_eq!(conn.zcard::<_, u64>(POOL).expect("ZCARD"), 0);
    assert!(!conn.exists::<_, bool>("delayer:job_bucket:j").expect("EXISTS"));
}

#[test]
fn migrate_fails_before_taking_an_id_when_the_destination_has_the_wrong_type() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let _: () = conn.hset_multiple("delayer:job_bucket:r", &[("topic", "mail"), ("body", "x")]).expect("HSET");
    let _: () = conn.lpush(READY, "r").expect("LPUSH");
    let _: () = conn.set("delayer:{mail}:ready", "x").expect("SET");
    let migrate = redis::Script::new(include_str!("../lua/migrate.lua"));
    let err = migrate
        .key(READY)
        .key("delayer:{mail}:ready")
        .arg(BUCKETS)
        .arg("delayer:{mail}:job:")
        .arg("mail")
        .arg("list")
        .arg("")
        .arg(10)
        .invoke::<Value>(&mut conn)
        .expect_err("a destination of the wrong type");
    assert_eq!(err.code(), Some("WRONGTYPE"));
    let left: Vec<String> = conn.lrange(READY, 0, -1).expect("LRANGE");
    assert_eq!(left, ["r"], "the id stays where it was");
    assert!(conn.exists::<_, bool>("delayer:job_bucket:r").expect("EXISTS"), "its bucket too");
}
