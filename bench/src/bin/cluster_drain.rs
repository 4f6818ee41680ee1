//! `cluster-drain`: the per-topic layout on a local 3-master Redis Cluster
//! beside one Redis, in the same run (issue 12's cluster rows).
//!
//! For each deployment: the Rust SDK's push_many fills `--jobs` jobs over
//! `--topics` topics, all due at once (its rate is the push_many row), then
//! the real `delayer` server (`--delayer-bin`, release build) starts and the
//! time until every job is in its topic's ready list is the drain row. The
//! cluster's nodes and the single Redis run on this machine, so the cluster
//! measures its overhead (redirections, one script call per topic and node),
//! not added capacity: three masters share the same two cores.
//!
//! usage: cluster-drain [--jobs N] [--topics N] [--delayer-bin FILE]

use delayer::{Delayer, Job, Layout};
use delayer_protocol::keys::TopicKeys;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use testkit::cluster::Cluster;
use testkit::{DelayerProcess, RedisServer};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn number(name: &str, default: u64) -> u64 {
    match arg(name).map(|v| v.replace('_', "").parse::<u64>()) {
        None => default,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("cluster-drain: {name} needs a positive number");
            std::process::exit(2);
        }
    }
}

/// (push_many jobs/s, drain jobs/s).
fn run(redis_section: &str, d: &Delayer, ready: impl Fn() -> u64, bin: &str, jobs: u64, topics: u64) -> (f64, f64) {
    let all: Vec<Job> =
        (0..jobs).map(|i| Job::new(format!("t{}", i % topics), format!("{i}"), Duration::ZERO)).collect();
    // Runs of one topic, as a producer of one kind of job sends them.
    let mut sorted = all;
    sorted.sort_by(|a, b| a.topic.cmp(&b.topic));
    let started = Instant::now();
    for chunk in sorted.chunks(1000) {
        d.push_many(chunk).unwrap_or_else(|e| panic!("push_many: {e}"));
    }
    let pushed = jobs as f64 / started.elapsed().as_secs_f64();
    eprintln!("  filled in {:.1} s; starting the server", started.elapsed().as_secs_f64());
    let conf = format!("[delayer]\ntimer_interval = 1000\nlayout = topic\nlog_level = warn\n\n{redis_section}");
    let started = Instant::now();
    let server = DelayerProcess::start(bin, &conf);
    let mut seen = 0;
    while seen < jobs {
        seen = ready();
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "drain stalled at {seen} of {jobs}:\n{}",
            server.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (pushed, jobs as f64 / started.elapsed().as_secs_f64())
}

fn main() {
    let (jobs, topics) = (number("--jobs", 300_000), number("--topics", 30));
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = arg("--delayer-bin").map(PathBuf::from).unwrap_or_else(|| root.join("target/release/delayer"));
    let bin = bin.display().to_string();
    let keys = TopicKeys::new("delayer:");
    let names: Vec<String> = (0..topics).map(|t| keys.ready(&format!("t{t}"))).collect();
    println!("{jobs} jobs over {topics} topics, all due; the server from its start until every job is ready");

    let redis = RedisServer::start();
    let single = Delayer::open(&redis.url()).and_then(|d| d.with_layout(Layout::Topic)).expect("client");
    let conn = std::cell::RefCell::new(redis.connection());
    let ready_single =
        || names.iter().map(|k| redis::cmd("LLEN").arg(k).query::<u64>(&mut *conn.borrow_mut()).unwrap_or(0)).sum();
    let section = format!("[redis]\nhost = 127.0.0.1\nport = {}\n", redis.port());
    let (push_one, drain_one) = run(&section, &single, ready_single, &bin, jobs, topics);
    println!("one Redis:           push_many {push_one:>9.0} jobs/s, drain {drain_one:>9.0} jobs/s");
    drop(redis);

    let cluster = Cluster::start();
    eprintln!("  cluster up");
    let dir = std::env::temp_dir().join(format!("cluster-drain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let conf = dir.join("delayer.conf");
    std::fs::write(&conf, format!("[delayer]\nlayout = topic\n\n{}", cluster.redis_section())).expect("conf");
    let clustered = Delayer::from_conf(&conf).expect("cluster client");
    let seeds: Vec<String> = cluster.nodes().iter().map(|n| format!("redis://{n}/")).collect();
    let watch = redis::cluster::ClusterClient::new(seeds).and_then(|c| c.get_connection()).expect("cluster connection");
    let watch = std::cell::RefCell::new(watch);
    let ready_cluster =
        || names.iter().map(|k| redis::cmd("LLEN").arg(k).query::<u64>(&mut *watch.borrow_mut()).unwrap_or(0)).sum();
    let (push_c, drain_c) = run(&cluster.redis_section(), &clustered, ready_cluster, &bin, jobs, topics);
    println!("3-master cluster:    push_many {push_c:>9.0} jobs/s, drain {drain_c:>9.0} jobs/s");
    println!("cluster / one Redis: push_many {:.2}, drain {:.2}", push_c / push_one, drain_c / drain_one);
    let _ = std::fs::remove_dir_all(dir);
}
