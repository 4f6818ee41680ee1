//! lua/move_topic.lua, the per-topic layout's drain script (PROTOCOL.md,
//! "The per-topic layout"), against a real redis-server: what it moves, in
//! which order, what it leaves, and what it answers. The server loop that
//! will call it is not written yet; this holds the script to its header.

use redis::{Commands, Script, Value};
use testkit::RedisServer;

const POOL: &str = "delayer:{mail}:pool";
const READY: &str = "delayer:{mail}:ready";
const RESERVED: &str = "delayer:{mail}:reserved";
const FLOW: &str = "delayer:{mail}:flow";

fn script() -> Script {
    Script::new(include_str!("../lua/move_topic.lua"))
}

/// One call of move_topic.lua on "mail" with `batch`.
fn call(conn: &mut redis::Connection, batch: u32) -> redis::RedisResult<Vec<Value>> {
    script().key(POOL).key(READY).key(RESERVED).key(FLOW).arg(batch).invoke(conn)
}

fn now(conn: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    s as f64 + us as f64 / 1e6
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::Nil => String::new(),
        other => panic!("expected a string, got {other:?}"),
    }
}

#[test]
fn moves_due_ids_in_due_order_in_batches_and_leaves_the_rest() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let t = now(&mut conn);
    // Three due (out of insertion order), one due in an hour.
    let _: () = conn
        .zadd_multiple(POOL, &[(t - 30.0, "b"), (t - 50.0, "a"), (t - 10.0, "c"), (t + 3600.0, "later")])
        .expect("ZADD");
    // "c" was reserved once and pushed again by a 1.x-style write: stale.
    let _: () = conn.zadd(RESERVED, "c", 1).expect("ZADD reserved");

    let reply: Vec<Value> = call(&mut conn, 2).expect("first batch");
    assert_eq!(reply[0], Value::Int(2), "a full batch: {reply:?}");
    assert_eq!(text(&reply[3]).parse::<f64>().expect("oldest_due").round(), (t - 50.0).round());
    assert_eq!(text(&reply[4]).parse::<f64>().expect("newest_due").round(), (t - 30.0).round());
    assert_eq!(text(&reply[1]).parse::<f64>().expect("next_due").round(), (t - 10.0).round());
    assert_eq!(reply[5], Value::Int(2), "pool_size");
    let clock = text(&reply[2]).parse::<f64>().expect("now");
    assert!((clock - t).abs() < 5.0, "now is Redis's clock: {clock} vs {t}");

    let reply: Vec<Value> = call(&mut conn, 2).expect("second batch");
    assert_eq!(reply[0], Value::Int(1), "only c is left due: {reply:?}");
    assert_eq!(text(&reply[1]).parse::<f64>().expect("next_due").round(), (t + 3600.0).round());

    // First due first out: consumers RPOP.
    let order: Vec<String> = conn.lrange(READY, 0, -1).expect("LRANGE");
    assert_eq!(order, ["c", "b", "a"]);
    let left: Vec<String> = conn.zrange(POOL, 0, -1).expect("ZRANGE");
    assert_eq!(left, ["later"], "a job not yet due stays");
    let stale: Option<f64> = conn.zscore(RESERVED, "c").expect("ZSCORE");
    assert_eq!(stale, None, "the stale reservation of a moved id is ended");

    let reply: Vec<Value> = call(&mut conn, 2).expect("nothing due");
    assert_eq!(reply[0], Value::Int(0));
    assert_eq!((text(&reply[3]), text(&reply[4])), (String::new(), String::new()));
}

#[test]
fn a_paused_topic_moves_nothing_and_names_its_last_resume() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let t = now(&mut conn);
    let _: () = conn.zadd_multiple(POOL, &[(t - 30.0, "a"), (t - 10.0, "b")]).expect("ZADD");
    let _: () =
        conn.hset_multiple(FLOW, &[("paused", "1.000"), ("resumed", "5.000"), ("last_paused", "4.000")]).expect("HSET");
    let reply = call(&mut conn, 10).expect("paused");
    assert_eq!(reply[0], Value::Int(0), "nothing moved: {reply:?}");
    assert_eq!(text(&reply[1]), "", "no next due time: the pool head is not the topic's next time while paused");
    assert_eq!(reply[5], Value::Int(2));
    assert_eq!((text(&reply[7]), text(&reply[8]), text(&reply[9])), ("paused".into(), "5.000".into(), "4.000".into()));
    let ready: Vec<String> = conn.lrange(READY, 0, -1).expect("LRANGE");
    assert!(ready.is_empty());

    let _: () = conn.hdel(FLOW, "paused").expect("HDEL");
    let reply = call(&mut conn, 10).expect("resumed");
    assert_eq!(reply[0], Value::Int(2));
    assert_eq!((text(&reply[7]), text(&reply[8])), (String::new(), "5.000".into()));

    let _: () = conn.del(FLOW).expect("DEL");
    let _: () = conn.set(FLOW, "not a hash").expect("SET");
    let _: () = conn.zadd(POOL, "c", t - 1.0).expect("ZADD");
    let err = call(&mut conn, 10).expect_err("a flow hash of the wrong type");
    assert!(err.to_string().contains(FLOW), "{err}");
    let left: Vec<String> = conn.zrange(POOL, 0, -1).expect("ZRANGE");
    assert_eq!(left, ["c"], "nothing moved, nothing lost");
}
