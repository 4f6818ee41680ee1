//! The per-topic layout's index (`<prefix>due`, `<prefix>topics`) is the
//! server's, kept from the scripts' announcements on the wake channel: no
//! client call touches it, so a broken index key fails none (issue 20, then
//! issue 21). Here the index keys hold a string (WRONGTYPE), or Redis is
//! full (OOM): push, push_many, reserve and touch answer their script's
//! result, and the job is really there.

use delayer::{aio, Delayer, Job, Layout};
use redis::Commands;
use std::time::Duration;
use testkit::RedisServer;

const TTR: Duration = Duration::from_secs(30);

fn pool(prefix: &str, topic: &str) -> String {
    format!("{prefix}{{{topic}}}:pool")
}

/// The server's part for a waiting job: from the pool to its ready queue.
fn make_ready(conn: &mut redis::Connection, prefix: &str, topic: &str, id: &str) {
    let removed: i64 = conn.zrem(pool(prefix, topic), id).expect("zrem");
    assert_eq!(removed, 1, "{id} not waiting");
    let _: () = conn.lpush(format!("{prefix}{{{topic}}}:ready"), id).expect("lpush");
}

/// A job's hash, as a server started later would read it.
fn has_job(conn: &mut redis::Connection, prefix: &str, topic: &str, id: &str) -> bool {
    conn.exists(format!("{prefix}{{{topic}}}:job:{id}")).expect("exists")
}

fn client(redis: &RedisServer, prefix: &str) -> Delayer {
    Delayer::open(&redis.url()).expect("client").with_prefix(prefix).with_layout(Layout::Topic).expect("layout")
}

#[test]
fn a_wrong_typed_index_key_fails_no_call() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    for broken in ["topics", "due"] {
        let prefix = format!("s{broken}:");
        let _: () = conn.set(format!("{prefix}{broken}"), "x").expect("set");
        let d = client(&redis, &prefix);
        d.push("mail", "1", Duration::ZERO).expect("push");
        assert!(conn.zscore::<_, _, Option<f64>>(pool(&prefix, "mail"), "1").expect("zscore").is_some());
        let many =
            [Job::new("mail", "2", Duration::ZERO).if_absent(), Job::new("mail", "3", Duration::ZERO).if_absent()];
        assert_eq!(d.push_many(&many).expect("push_many, no id taken").len(), 2);
        for id in ["1", "2", "3"] {
            assert!(has_job(&mut conn, &prefix, "mail", id), "{broken}: job {id}");
        }
        make_ready(&mut conn, &prefix, "mail", "1");
        let job = d.reserve("mail", TTR).expect("reserve").expect("the ready job");
        assert_eq!(job.id, "1");
        assert!(d.touch(&job, TTR).expect("touch").is_some(), "{broken}: the reservation held");
    }
}

#[tokio::test]
async fn a_wrong_typed_index_key_fails_no_async_call() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    for broken in ["topics", "due"] {
        let prefix = format!("a{broken}:");
        let _: () = conn.set(format!("{prefix}{broken}"), "x").expect("set");
        let d = aio::Delayer::open(&redis.url())
            .expect("client")
            .with_prefix(&prefix)
            .with_layout(Layout::Topic)
            .expect("layout");
        d.push_job(&Job::new("mail", "1", Duration::ZERO)).await.expect("push");
        let many =
            [Job::new("mail", "2", Duration::ZERO).if_absent(), Job::new("mail", "3", Duration::ZERO).if_absent()];
        assert_eq!(d.push_many(&many).await.expect("push_many, no id taken").len(), 2);
        for id in ["1", "2", "3"] {
            assert!(has_job(&mut conn, &prefix, "mail", id), "{broken}: job {id}");
        }
        make_ready(&mut conn, &prefix, "mail", "1");
        let job = d.reserve("mail", TTR).await.expect("reserve").expect("the ready job");
        assert_eq!(job.id, "1");
        assert!(d.touch(&job, TTR).await.expect("touch").is_some(), "{broken}: the reservation held");
    }
}

/// Fills Redis with filler keys until a write is refused (OOM).
fn fill(conn: &mut redis::Connection) {
    let filler = "f".repeat(64 * 1024);
    for n in 0..10_000 {
        match conn.set::<_, _, ()>(format!("filler:{n}"), &filler) {
            Ok(()) => {}
            Err(e) if e.code() == Some("OOM") => return,
            Err(e) => panic!("filler: {e}"),
        }
    }
    panic!("Redis never filled up");
}

#[test]
fn a_full_redis_hands_out_the_reserved_job() {
    let redis = RedisServer::start_with(&["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"]);
    let mut conn = redis.connection();
    let d = client(&redis, "full:");
    d.push("mail", "1", Duration::ZERO).expect("push");
    d.push("mail", "2", Duration::ZERO).expect("push");
    make_ready(&mut conn, "full:", "mail", "1");
    make_ready(&mut conn, "full:", "mail", "2");
    fill(&mut conn);
    let first = d.reserve("mail", TTR).expect("reserve in a full Redis").expect("the ready job");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let second = rt.block_on(async {
        let d = aio::Delayer::open(&redis.url()).expect("client").with_prefix("full:").with_layout(Layout::Topic);
        d.expect("layout").reserve("mail", TTR).await.expect("async reserve").expect("the ready job")
    });
    assert_eq!([first.id.as_str(), second.id.as_str()], ["1", "2"]);
}
