//! Durable pushes (`Delayer::durable`): WAIT 1 after the write, on its
//! connection. With a replica in sync the push returns as usual; with none,
//! the job is written all the same and the push says `NotReplicated`. Real
//! redis-server processes, sync and async clients.

use delayer::{Delayer, Error, Job, PoolOptions};
use redis::Commands;
use std::time::Duration;
use testkit::{wait_until, RedisServer, DEADLINE};

fn replicated() -> (RedisServer, RedisServer) {
    // No diskless-sync delay: Redis 7 waits 5 s by default before the first sync.
    let primary = RedisServer::start_with(&["--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"]);
    let replicaof = format!("127.0.0.1 {}", primary.port());
    let replica = RedisServer::start_with(&["--save", "", "--replicaof", &replicaof]);
    let synced = wait_until(DEADLINE, || {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut replica.connection()).unwrap_or_default();
        info.contains("master_link_status:up")
    });
    assert!(synced, "the replica did not sync");
    (primary, replica)
}

#[test]
fn a_durable_push_returns_once_a_replica_has_it() {
    let (primary, _replica) = replicated();
    let client = Delayer::open(&primary.url()).expect("client").durable(Duration::from_secs(5));
    client.push("t", "a", Duration::from_secs(60)).expect("durable push");
    let due = client.push_many(&[Job::new("t", "b", Duration::from_secs(60))]).expect("durable push_many");
    assert_eq!(due.len(), 1);
    let pool: usize = primary.connection().zcard("delayer:job_pool").expect("zcard");
    assert_eq!(pool, 2);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let aio = delayer::aio::Delayer::open(&primary.url()).expect("async").durable(Duration::from_secs(5));
        aio.push("t", "c", Duration::from_secs(60)).await.expect("async durable push");
        aio.push_many(&[Job::new("t", "d", Duration::from_secs(60))]).await.expect("async durable push_many");
    });
}

#[test]
fn without_a_replica_the_push_is_written_and_says_so() {
    let redis = RedisServer::start();
    let client =
        Delayer::with_options(redis::Client::open(redis.url()).expect("client"), "delayer:", &PoolOptions::default());
    let durable = client.durable(Duration::from_millis(50));
    match durable.push("t", "alone", Duration::from_secs(60)) {
        Err(Error::NotReplicated(n)) => {
            assert_eq!(n.due.len(), 1);
            assert_eq!(n.timeout, Duration::from_millis(50));
        }
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    let written: Option<f64> = redis.connection().zscore("delayer:job_pool", "alone").expect("zscore");
    assert!(written.is_some(), "the job is on the master all the same");
    let many = durable.push_many(&[Job::new("t", "m1", Duration::ZERO), Job::new("t", "m2", Duration::ZERO)]);
    assert!(matches!(many, Err(Error::NotReplicated(ref n)) if n.due.len() == 2), "{many:?}");
    // The same client without durable pushes as ever.
    client.push("t", "plain", Duration::from_secs(60)).expect("plain push");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let aio = rt.block_on(async {
        let aio = delayer::aio::Delayer::open(&redis.url()).expect("async").durable(Duration::from_millis(50));
        aio.push("t", "async-alone", Duration::from_secs(60)).await
    });
    assert!(matches!(aio, Err(Error::NotReplicated(_))), "{aio:?}");
}
