//! `failover-loss`: how many acknowledged pushes a failover loses, on
//! Sentinel or (`--cluster`) on a Redis Cluster.
//!
//! Redis replicates asynchronously, so a push the master acknowledged may
//! not have reached its replica when the master dies. This starts a local
//! deployment (testkit: 1 master, 1 replica and 3 sentinels; or with
//! `--cluster` 6 cluster nodes, 3 masters with a replica each), pushes from
//! several threads as fast as they go through the Rust SDK in that mode,
//! recording every push that returned Ok, kills a master with SIGKILL,
//! keeps pushing through the failover, and then counts the recorded ids
//! missing from the promoted replica's pool. With `--durable-ms` the client
//! is `durable(...)`: a push is Ok only once a replica has it (WAIT 1), so
//! none should be missing; its cost shows in the push rate.
//!
//! On the cluster the per-topic layout is used; thread t pushes to a topic
//! served by master t mod 3, and the master of thread 0's topic is killed:
//! ids acknowledged on the other masters must all be there too, and are
//! counted apart.
//!
//! usage: failover-loss [--cluster] [--threads N] [--secs N] [--after N] [--durable-ms MS] [--runs N]

use delayer::{Delayer, Error, Layout, PoolOptions};
use delayer_protocol::cluster::ClusterSettings;
use delayer_protocol::conf::RedisSettings;
use delayer_protocol::keys::TopicKeys;
use delayer_protocol::sentinel::{parse_nodes, SentinelSettings};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use testkit::cluster::Cluster;
use testkit::sentinel::{Sentinels, MASTER_NAME};

const USAGE: &str =
    "usage: failover-loss [--cluster] [--threads N] [--secs N] [--after N] [--durable-ms MS] [--runs N]";
const PREFIX: &str = "loss:";

struct Options {
    cluster: bool,
    threads: usize,
    secs: u64,
    after: u64,
    durable_ms: Option<u64>,
    runs: usize,
}

fn options() -> Result<Options, String> {
    let mut o = Options { cluster: false, threads: 8, secs: 3, after: 1, durable_ms: None, runs: 1 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            args.next().and_then(|v| v.parse().ok()).ok_or_else(|| format!("{name} needs a number"))
        };
        match a.as_str() {
            "--cluster" => o.cluster = true,
            "--threads" => o.threads = num("--threads")?.max(1) as usize,
            "--secs" => o.secs = num("--secs")?,
            "--after" => o.after = num("--after")?,
            "--durable-ms" => o.durable_ms = Some(num("--durable-ms")?.max(1)),
            "--runs" => o.runs = num("--runs")?.max(1) as usize,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

/// One run's numbers.
#[derive(Default)]
struct Run {
    acked: usize,
    acked_before_kill: usize,
    rate_before_kill: f64,
    not_replicated: usize,
    errors: usize,
    /// Acknowledged ids missing from the promoted replica.
    missing: usize,
    /// Cluster only: acknowledged on the masters not killed, and missing there.
    acked_elsewhere: usize,
    missing_elsewhere: usize,
    /// Cluster only: not-replicated answers and failed calls from threads on
    /// the masters not killed (does one master's failover disturb the others?).
    not_replicated_elsewhere: usize,
    errors_elsewhere: usize,
    /// Cluster only: acknowledged on the killed master's topic after the
    /// kill (the client found the promoted replica).
    acked_after_on_killed: usize,
    /// The last error a thread on the killed / on another master saw.
    last_error_killed: Option<String>,
    last_error_elsewhere: Option<String>,
    failover: Duration,
}

/// What one pushing thread saw.
struct Pushed {
    topic: String,
    acked: Vec<String>,
    before: usize,
    not_replicated: usize,
    errors: usize,
    /// The last failed call's error, to say what the failures were.
    last_error: Option<String>,
}

/// Starts a thread per topic in `topics`, each pushing to its topic until
/// `stop`; `killed` marks the moment the master dies.
fn pushers(
    client: &Delayer,
    topics: Vec<String>,
    stop: &Arc<AtomicBool>,
    killed: &Arc<AtomicBool>,
) -> Vec<thread::JoinHandle<Pushed>> {
    topics
        .into_iter()
        .enumerate()
        .map(|(t, topic)| {
            let (client, stop, killed) = (client.clone(), stop.clone(), killed.clone());
            thread::spawn(move || {
                let mut p =
                    Pushed { topic, acked: Vec::new(), before: 0, not_replicated: 0, errors: 0, last_error: None };
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let id = format!("{t}-{n}");
                    match client.push(&p.topic, &id, Duration::from_secs(3600)) {
                        Ok(_) => {
                            p.acked.push(id);
                            if !killed.load(Ordering::Relaxed) {
                                p.before += 1;
                            }
                        }
                        Err(Error::NotReplicated(_)) => p.not_replicated += 1,
                        Err(e) => {
                            p.errors += 1;
                            p.last_error = Some(e.to_string());
                            thread::sleep(Duration::from_millis(5));
                        }
                    }
                }
                p
            })
        })
        .collect()
}

/// How many of `ids` have no score in `pool` on the node `conn` reaches.
fn missing(conn: &mut redis::Connection, pool: &str, ids: &[String]) -> usize {
    let mut n = 0;
    for chunk in ids.chunks(10_000) {
        let scores: Vec<Option<f64>> = redis::cmd("ZMSCORE").arg(pool).arg(chunk).query(conn).expect("ZMSCORE");
        n += scores.iter().filter(|s| s.is_none()).count();
    }
    n
}

fn client_for(settings: RedisSettings, o: &Options) -> Delayer {
    let pool = PoolOptions { max_size: o.threads as u32, ..PoolOptions::default() };
    let client = Delayer::with_target(settings.target().expect("target"), PREFIX, &pool);
    match o.durable_ms {
        Some(ms) => client.durable(Duration::from_millis(ms)),
        None => client,
    }
}

/// Pushes for `o.secs`, runs `kill` (which returns once a replica took
/// over), pushes `o.after` seconds more so the clients prove they follow,
/// and joins.
fn push_through(
    o: &Options,
    client: &Delayer,
    topics: Vec<String>,
    kill: impl FnOnce(),
) -> (Vec<Pushed>, f64, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    let workers = pushers(client, topics, &stop, &killed);
    let started = Instant::now();
    thread::sleep(Duration::from_secs(o.secs));
    killed.store(true, Ordering::Relaxed);
    let elapsed_before = started.elapsed().as_secs_f64();
    let kill_began = Instant::now();
    kill();
    let failover = kill_began.elapsed();
    thread::sleep(Duration::from_secs(o.after));
    stop.store(true, Ordering::Relaxed);
    (workers.into_iter().map(|w| w.join().expect("pusher")).collect(), elapsed_before, failover)
}

fn tally(pushed: &[Pushed], elapsed_before: f64) -> Run {
    let mut r = Run::default();
    for p in pushed {
        r.acked += p.acked.len();
        r.acked_before_kill += p.before;
        r.not_replicated += p.not_replicated;
        r.errors += p.errors;
    }
    r.rate_before_kill = r.acked_before_kill as f64 / elapsed_before;
    r
}

fn run_sentinel(o: &Options) -> Run {
    let mut deployment = Sentinels::start();
    let settings = RedisSettings {
        sentinel: Some(SentinelSettings {
            nodes: parse_nodes(&deployment.nodes_setting()).expect("nodes"),
            master_name: MASTER_NAME.into(),
            username: None,
            password: None,
            tls: false,
        }),
        ..RedisSettings::default()
    };
    let client = client_for(settings, o);
    let mut new_master = 0;
    let (pushed, elapsed_before, failover) =
        push_through(o, &client, vec!["loss".to_string(); o.threads], || new_master = deployment.kill_master());
    let mut r = tally(&pushed, elapsed_before);
    r.failover = failover;
    let mut conn = deployment.connection(new_master);
    for p in &pushed {
        r.missing += missing(&mut conn, &format!("{PREFIX}job_pool"), &p.acked);
    }
    r
}

/// One topic per master of `cluster`, in the order of its masters.
fn topic_per_master(cluster: &Cluster, keys: &TopicKeys) -> Vec<String> {
    let masters = cluster.masters();
    let mut found: Vec<Option<String>> = vec![None; masters.len()];
    for n in 0..10_000 {
        let topic = format!("loss{n}");
        let owner = cluster.master_for(&keys.pool(&topic));
        if let Some(k) = masters.iter().position(|&m| m == owner) {
            found[k].get_or_insert(topic);
        }
        if found.iter().all(Option::is_some) {
            return found.into_iter().flatten().collect();
        }
    }
    panic!("no topic on every master");
}

fn run_cluster(o: &Options) -> Run {
    let mut cluster = Cluster::start();
    let keys = TopicKeys::new(PREFIX);
    let per_master = topic_per_master(&cluster, &keys);
    let nodes = cluster.ports().into_iter().map(|p| ("127.0.0.1".to_string(), p)).collect();
    let settings = RedisSettings { cluster: Some(ClusterSettings { nodes, tls: false }), ..RedisSettings::default() };
    let client = client_for(settings, o).with_layout(Layout::Topic).expect("per-topic layout");
    let topics: Vec<String> = (0..o.threads).map(|t| per_master[t % per_master.len()].clone()).collect();
    let doomed = per_master[0].clone();
    let (pushed, elapsed_before, failover) = push_through(o, &client, topics, || {
        cluster.kill_master(Some(&keys.pool(&doomed)));
    });
    let mut r = tally(&pushed, elapsed_before);
    r.failover = failover;
    for p in &pushed {
        let pool = keys.pool(&p.topic);
        let mut conn = cluster.connection(cluster.master_for(&pool));
        let lost = missing(&mut conn, &pool, &p.acked);
        r.missing += lost;
        if p.topic != doomed {
            r.acked_elsewhere += p.acked.len();
            r.missing_elsewhere += lost;
            r.not_replicated_elsewhere += p.not_replicated;
            r.errors_elsewhere += p.errors;
            r.last_error_elsewhere = r.last_error_elsewhere.take().or(p.last_error.clone());
        } else {
            r.acked_after_on_killed += p.acked.len() - p.before;
            r.last_error_killed = r.last_error_killed.take().or(p.last_error.clone());
        }
    }
    r
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("failover-loss: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let mode = o.durable_ms.map_or("plain push".to_string(), |ms| format!("durable push (WAIT 1 {ms})"));
    let deployment = if o.cluster { "Redis Cluster (3 masters), per-topic layout" } else { "Sentinel" };
    println!(
        "{deployment}: {mode}, {} threads, master killed after {} s, pushing {} s after the failover",
        o.threads, o.secs, o.after
    );
    for i in 1..=o.runs {
        let r = if o.cluster { run_cluster(&o) } else { run_sentinel(&o) };
        println!(
            "run {i}: acked {} ({} before the kill, {:.0} pushes/s), lost {} acked pushes, {} not replicated in time, \
             {} failed calls during the failover (failover took {:.1} s)",
            r.acked,
            r.acked_before_kill,
            r.rate_before_kill,
            r.missing,
            r.not_replicated,
            r.errors,
            r.failover.as_secs_f64()
        );
        if o.cluster {
            println!(
                "       killed master's topic: {} acked after the kill; the masters not killed: acked {}, lost {}, \
                 {} not replicated in time, {} failed calls",
                r.acked_after_on_killed,
                r.acked_elsewhere,
                r.missing_elsewhere,
                r.not_replicated_elsewhere,
                r.errors_elsewhere
            );
            for (which, e) in [("killed master's topic", &r.last_error_killed), ("elsewhere", &r.last_error_elsewhere)]
            {
                if let Some(e) = e {
                    println!("       last failed call, {which}: {e}");
                }
            }
        }
    }
}
