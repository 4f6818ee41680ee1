//! The Rust SDK against a real redis-server: the data it writes is exactly the
//! protocol's, and it reads what others (including Delayer 1.x clients) write.
//! Moves are done by hand here; the server's own tests cover moving.

use delayer::{Delayer, Error, Job};
use redis::Commands;
use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant, UNIX_EPOCH};
use testkit::RedisServer;

fn client(redis: &RedisServer) -> Delayer {
    Delayer::open(&redis.url()).expect("client")
}

fn redis_now(conn: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    s as f64 + us as f64 / 1e6
}

/// Makes job `id` ready as the server would: out of the pool, onto its queue.
fn make_ready(conn: &mut redis::Connection, topic: &str, id: &str) {
    let _: () = conn.zrem("delayer:job_pool", id).expect("zrem");
    let _: () = conn.lpush(format!("delayer:ready_queue:{topic}"), id).expect("lpush");
}

#[test]
fn push_writes_the_protocol_layout() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let before = redis_now(&mut conn);
    let due = d
        .push_job(
            &Job::new("order", "order:1", Duration::from_millis(2500))
                .body("hello")
                .ready_max_lifetime(Duration::from_secs(60)),
        )
        .expect("push");

    let bucket: HashMap<String, String> = conn.hgetall("delayer:job_bucket:order:1").expect("hgetall");
    assert_eq!(bucket, HashMap::from([("topic".into(), "order".into()), ("body".into(), "hello".into())]));
    let score: f64 = conn.zscore("delayer:job_pool", "order:1").expect("zscore");
    assert!((score - (before + 2.5)).abs() < 0.5, "score {score} vs now {before}");
    let due_secs = due.duration_since(UNIX_EPOCH).expect("after epoch").as_secs_f64();
    assert!((due_secs - score).abs() < 0.002, "returned due {due_secs} vs score {score}");
    let ttl: i64 = conn.pttl("delayer:job_bucket:order:1").expect("pttl");
    assert!((61_000..=62_500).contains(&ttl), "ttl {ttl} ms, expected delay + lifetime");
    // Millisecond precision: the score has a fractional part in thousandths.
    assert_eq!((score * 1000.0).round() / 1000.0, score);
}

#[test]
fn pop_hands_out_first_due_first_and_deletes_the_job() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    assert_eq!(d.pop("t").expect("pop empty"), None);
    for id in ["a", "b", "c"] {
        d.push_job(&Job::new("t", id, Duration::ZERO).body(format!("body-{id}"))).expect("push");
        make_ready(&mut conn, "t", id);
    }
    let got: Vec<_> = std::iter::from_fn(|| d.pop("t").expect("pop")).collect();
    assert_eq!(got.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(got[1].body_str(), Some("body-b"));
    assert_eq!(got[1].topic, "t");
    let left: i64 = conn.exists("delayer:job_bucket:a").expect("exists");
    assert_eq!(left, 0, "pop deletes the bucket");
}

#[test]
fn pop_skips_ids_whose_bucket_is_gone() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    d.push("t", "gone", Duration::ZERO).expect("push");
    d.push("t", "live", Duration::ZERO).expect("push");
    make_ready(&mut conn, "t", "gone");
    make_ready(&mut conn, "t", "live");
    let _: () = conn.del("delayer:job_bucket:gone").expect("del");
    assert_eq!(d.pop("t").expect("pop").map(|m| m.id), Some("live".to_string()));
    assert_eq!(d.pop("t").expect("pop"), None);
}

#[test]
fn bodies_are_binary_safe_up_to_a_mebibyte() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let bodies: Vec<Vec<u8>> =
        vec![Vec::new(), (0..=255u8).collect(), "héllo wörld ✓ 延迟".into(), vec![0xAB; 1 << 20]];
    for (i, body) in bodies.iter().enumerate() {
        let id = format!("b{i}");
        d.push_job(&Job::new("bin", &id, Duration::ZERO).body(body.clone())).expect("push");
        make_ready(&mut conn, "bin", &id);
        let got = d.pop("bin").expect("pop").expect("a job");
        assert_eq!(&got.body, body, "body {i}");
    }
}

#[test]
fn bpop_waits_for_a_job_and_times_out_with_none() {
    let redis = RedisServer::start();
    let d = client(&redis);
    let start = Instant::now();
    assert_eq!(d.bpop("t", Duration::from_millis(200)).expect("bpop"), None);
    assert!(start.elapsed() >= Duration::from_millis(200), "returned after {:?}", start.elapsed());

    let url = redis.url();
    let pusher = thread::spawn(move || {
        let d = Delayer::open(&url).expect("client");
        let mut conn = redis::Client::open(url.as_str()).and_then(|c| c.get_connection()).expect("conn");
        thread::sleep(Duration::from_millis(100));
        d.push("t", "late", Duration::ZERO).expect("push");
        make_ready(&mut conn, "t", "late");
    });
    let got = d.bpop("t", Duration::from_secs(10)).expect("bpop");
    pusher.join().expect("pusher");
    assert_eq!(got.map(|m| m.id), Some("late".to_string()));
}

#[test]
fn bpop_skips_a_ready_id_whose_bucket_is_gone() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let _: () = conn.lpush("delayer:ready_queue:t", "ghost").expect("lpush");
    d.push("t", "real", Duration::ZERO).expect("push");
    make_ready(&mut conn, "t", "real");
    assert_eq!(d.bpop("t", Duration::from_secs(2)).expect("bpop").map(|m| m.id), Some("real".into()));
}

#[test]
fn remove_cancels_waiting_and_ready_jobs() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    d.push("t", "w", Duration::from_secs(60)).expect("push");
    assert!(d.remove("w").expect("remove"));
    let in_pool: Option<f64> = conn.zscore("delayer:job_pool", "w").expect("zscore");
    assert_eq!(in_pool, None);
    assert!(!d.remove("w").expect("second remove"), "nothing left to cancel");
    assert!(!d.remove("never-pushed").expect("remove unknown"));

    d.push("t", "r", Duration::ZERO).expect("push");
    make_ready(&mut conn, "t", "r");
    assert!(d.remove("r").expect("remove ready"));
    assert_eq!(d.pop("t").expect("pop"), None, "a removed ready job is skipped");
}

#[test]
fn bad_input_is_refused_before_touching_redis() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let bad = [
        Job::new("", "id", Duration::ZERO),
        Job::new("t", "", Duration::ZERO),
        Job::new("t", "id", Duration::from_secs(315_360_001)),
        Job::new("t", "id", Duration::ZERO).ready_max_lifetime(Duration::ZERO),
        Job::new("t", "id", Duration::ZERO).ready_max_lifetime(Duration::from_millis(1500)),
    ];
    for job in &bad {
        assert!(matches!(d.push_job(job), Err(Error::InvalidArgument(_))), "{job:?} accepted");
    }
    assert!(matches!(
        d.push_many(&[Job::new("t", "ok", Duration::ZERO), bad[0].clone()]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(d.pop(""), Err(Error::InvalidArgument(_))));
    assert!(matches!(d.remove(""), Err(Error::InvalidArgument(_))));
    let keys: Vec<String> = conn.keys("*").expect("keys");
    assert!(keys.is_empty(), "nothing written: {keys:?}");
}

#[test]
fn push_many_pushes_every_job() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);
    let jobs: Vec<Job> =
        (0..2500).map(|i| Job::new(format!("t{}", i % 3), format!("id{i}"), Duration::from_secs(60))).collect();
    let due = d.push_many(&jobs).expect("push_many");
    assert_eq!(due.len(), 2500);
    let n: u64 = conn.zcard("delayer:job_pool").expect("zcard");
    assert_eq!(n, 2500);
    let topic: String = conn.hget("delayer:job_bucket:id2401", "topic").expect("hget");
    assert_eq!(topic, "t1");
    // After SCRIPT FLUSH the pipeline loads the script again.
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut conn).expect("flush");
    d.push_many(&jobs[..10]).expect("push_many after flush");
    d.push("t", "single", Duration::ZERO).expect("push after flush");
}

#[test]
fn interop_with_delayer_1x_clients() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let d = client(&redis);

    testkit::delayer_1x_push(&mut conn, "old-1", "legacy", "from 1.x", 0);
    make_ready(&mut conn, "legacy", "old-1");
    let got = d.pop("legacy").expect("pop").expect("the 1.x job");
    assert_eq!((got.id.as_str(), got.body_str()), ("old-1", Some("from 1.x")));

    // Ours, consumed as a 1.x client does: RPOP, HGETALL, DEL.
    d.push_job(&Job::new("legacy", "new-1", Duration::ZERO).body("from 2.x")).expect("push");
    make_ready(&mut conn, "legacy", "new-1");
    let id: String = conn.rpop("delayer:ready_queue:legacy", None).expect("rpop");
    let bucket: HashMap<String, String> = conn.hgetall(format!("delayer:job_bucket:{id}")).expect("hgetall");
    let _: () = conn.del(format!("delayer:job_bucket:{id}")).expect("del");
    assert_eq!(id, "new-1");
    assert_eq!(bucket.get("topic").map(String::as_str), Some("legacy"));
    assert_eq!(bucket.get("body").map(String::as_str), Some("from 2.x"));
}

#[test]
fn custom_prefix_and_conf_file() {
    let redis = RedisServer::start();
    let mut conn = redis.connection();
    let dir = testkit::temp_dir("conf");
    let path = dir.join("delayer.conf");
    std::fs::write(
        &path,
        format!(
            "[delayer]\nkey_prefix = shop:   ; comment\n[redis]\nhost = 127.0.0.1\nport = {}   ; comment\ndatabase = 3\npassword =   ; none\n",
            redis.port()
        ),
    )
    .expect("write conf");
    let d = Delayer::from_conf(&path).expect("from_conf");
    d.push("t", "p1", Duration::from_secs(9)).expect("push");
    let _: () = redis::cmd("SELECT").arg(3).query(&mut conn).expect("select");
    let n: u64 = conn.zcard("shop:job_pool").expect("zcard");
    assert_eq!(n, 1, "pushed under the prefix, in database 3");

    std::fs::write(&path, "[redis]\nport = seventy\n").expect("write conf");
    let err = Delayer::from_conf(&path).expect_err("bad port");
    let text = err.to_string();
    assert!(text.contains("[redis] port") && text.contains(":2:"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn unreachable_or_refusing_redis_is_a_clear_connection_error() {
    let port = testkit::free_port();
    let d = Delayer::open(&format!("redis://127.0.0.1:{port}/")).expect("lazy client");
    let start = Instant::now();
    assert!(matches!(d.push("t", "x", Duration::ZERO), Err(Error::Connection(_))));
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());

    let redis = RedisServer::start_with(&["--save", "", "--requirepass", "s3cret-pw"]);
    let d = Delayer::open(&format!("redis://:wrong-pw@127.0.0.1:{}/", redis.port())).expect("lazy client");
    let err = d.push("t", "x", Duration::ZERO).expect_err("wrong password");
    assert!(matches!(err, Error::Connection(_)), "{err:?}");
    let text = err.to_string();
    assert!(!text.contains("wrong-pw") && !text.contains("s3cret-pw"), "password leaked: {text}");
    let ok = Delayer::open(&format!("redis://:s3cret-pw@127.0.0.1:{}/", redis.port())).expect("client");
    ok.push("t", "x", Duration::ZERO).expect("right password");
}

#[test]
fn a_missing_password_is_an_authentication_error() {
    let redis = RedisServer::start_with(&["--save", "", "--requirepass", "s3cret-pw"]);
    let d = client(&redis);
    let body = vec![b'x'; 100_000]; // past what Redis reads from a client that has not authenticated
    let calls: Vec<(&str, delayer::Result<()>)> = vec![
        ("push", d.push("t", "x", Duration::ZERO).map(drop)),
        ("push with a body", d.push_job(&Job::new("t", "x", Duration::ZERO).body(body)).map(drop)),
        ("push_many", d.push_many(&[Job::new("t", "x", Duration::ZERO)]).map(drop)),
        ("pop", d.pop("t").map(drop)),
        ("bpop", d.bpop("t", Duration::from_millis(100)).map(drop)),
        ("breserve", d.breserve("t", Duration::from_secs(1), Duration::from_millis(100)).map(drop)),
        ("remove", d.remove("x").map(drop)),
    ];
    for (what, result) in calls {
        let err = result.expect_err(what);
        let text = err.to_string();
        assert!(matches!(err, Error::Connection(_)), "{what}: {err:?}");
        assert!(text.contains("authentication"), "{what}: {text}");
        assert!(!text.contains("s3cret-pw"), "{what}: {text}");
    }
}

#[tokio::test]
async fn a_missing_password_is_an_authentication_error_for_the_async_client() {
    let redis = RedisServer::start_with(&["--save", "", "--requirepass", "s3cret-pw"]);
    let d = delayer::aio::Delayer::open(&redis.url()).expect("client");
    for (what, result) in [
        ("push", d.push("t", "x", Duration::ZERO).await.map(drop)),
        ("pop", d.pop("t").await.map(drop)),
        ("bpop", d.bpop("t", Duration::from_millis(100)).await.map(drop)),
    ] {
        let err = result.expect_err(what);
        assert!(matches!(err, Error::Connection(_)) && err.to_string().contains("authentication"), "{what}: {err:?}");
    }
}

#[tokio::test]
async fn from_conf_refuses_unknown_keys_and_sections_as_the_server_does() {
    let dir = testkit::temp_dir("conf-typos");
    let path = dir.join("delayer.conf");
    let redis_keys = "url, host, port, database, username, password, tls_ca_file, tls_cert_file, tls_key_file, \
                      max_idle, max_active, idle_timeout, conn_max_lifetime, mode, nodes, master_name, \
                      sentinel_username, sentinel_password, tls, require_noeviction";
    let delayer_keys =
        "pid, timer_interval, access_log, error_log, batch_size, key_prefix, layout, log_level, log_format, metrics_addr, \
                        http_addr, http_token, http_read_token, http_allow_remote, \
                        http_allowed_hosts, http_trusted_proxies, http_session_secret, http_session_lifetime, \
                        http_max_connections, http_header_timeout, http_body_timeout, http_redis_timeout, \
                        http_max_waiting, metrics_allow_remote";
    let p = path.display();
    let cases = [
        (
            "[redis]\nhost = 127.0.0.1\nprot = 16391\n",
            format!("{p}:3: [redis] prot: unknown key (did you mean port?); [redis] takes {redis_keys}"),
        ),
        (
            "[delayer]\nkey_prefix = x:\ntimer_intervall = 5\n[redis]\nport = 1\n",
            format!(
                "{p}:3: [delayer] timer_intervall: unknown key (did you mean timer_interval?); [delayer] takes \
                 {delayer_keys}"
            ),
        ),
        (
            "[redis]\nport = 1\n\n[mysql]\nhost = x\n",
            format!("{p}:4: [mysql]: unknown section; known sections are [delayer] and [redis]"),
        ),
        ("port = 6379\n[redis]\n", format!("{p}:1: port: keys must be inside a [delayer] or [redis] section")),
    ];
    for (text, expected) in cases {
        std::fs::write(&path, text).expect("write conf");
        let err = Delayer::from_conf(&path).expect_err(text);
        assert!(matches!(err, Error::Config(_)), "{err:?}");
        assert_eq!(err.to_string(), expected);
        let err = delayer::aio::Delayer::from_conf(&path).expect_err(text);
        assert_eq!(err.to_string(), expected, "async");
    }
    // Every key the server takes is taken (a 1.x file, and the 2.x keys).
    std::fs::write(
        &path,
        "[delayer]\npid = d.pid\ntimer_interval = 1000\naccess_log = a.log\nerror_log = e.log\nbatch_size = 10\n\
         key_prefix = k:\nlog_level = info\nmetrics_addr = 127.0.0.1:9464\n\
         [redis]\nhost = 127.0.0.1\nport = 6379\ndatabase = 0\nusername =\npassword =   ; none\nmax_idle = 2\n\
         max_active = 20\nidle_timeout = 3600\nconn_max_lifetime = 3600\nrequire_noeviction = no\n",
    )
    .expect("write conf");
    assert_eq!(Delayer::from_conf(&path).expect("every server key").keys().prefix(), "k:");
    // The first 1.0 layout's keys with no use now are taken too.
    std::fs::write(
        &path,
        "[delayerd]\ninterval = 1000\naccess_log = a.log\nerror_log = e.log\n[redis]\nport = 6379\ntimeout = 3\n",
    )
    .expect("write conf");
    assert_eq!(Delayer::from_conf(&path).expect("a 1.0 file").keys().prefix(), "delayer:");
    let _ = std::fs::remove_dir_all(dir);
}
