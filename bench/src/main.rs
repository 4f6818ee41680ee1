//! `delayer-bench`: Delayer's benchmarks, in one run, against a redis-server
//! of its own on a free loopback port. See bench/README.md.

mod bullmq;
mod drain;
mod idle;
mod lateness;
mod lifecycle;
mod pushpop;
mod redisx;
mod report;
mod stats;
mod sys;
mod throughput;

use delayer::Delayer;
use std::path::{Path, PathBuf};
use std::time::Instant;
use testkit::RedisServer;

const USAGE: &str = "\
usage: delayer-bench [options]        (normally via bench/run.sh)

  --quick              smoke test: 100,000 backlog, 5 s lateness, 5,000 ops,
                       5 s idle; writes no RESULTS.md unless --out is given
  --backlog N          largest drain backlog (default 1000000; 10,000 and
                       100,000 are always run too when smaller)
  --lateness-secs N    how long jobs are pushed in each lateness scenario
                       (default 20)
  --rate N             push rate of the mixed lateness scenario, jobs/s
                       (default 5000; the short-delay ones run at 1000)
  --ops N              ops per SDK operation (default 20000)
  --bulk-ops N         jobs in the Rust push_many measurement (default 100000)
  --idle-secs N        idle measurement window (default 10)
  --worker-jobs N      backlog of the worker-throughput part (default 100000)
  --no-sdks            skip the Python and PHP SDKs
  --no-bullmq          skip BullMQ (lateness scenarios, worker throughput)
  --only LIST          run only these parts, comma-separated: drain, lateness,
                       pushpop, idle, worker, lifecycle (for profiling one of
                       them; lifecycle: bench/lifecycle_cost.py's table)
  --out FILE           markdown report (default bench/RESULTS.md, written by
                       full runs only: not with --quick or --only)
  --no-out             write no markdown report
  --delayer-bin FILE   server binary (default target/release/delayer)
  -h, --help           this text
";

pub struct Opts {
    pub quick: bool,
    pub backlog: u64,
    pub lateness_secs: u64,
    pub rate: u64,
    pub ops: u64,
    pub bulk_ops: u64,
    pub idle_secs: u64,
    pub worker_jobs: u64,
    pub sdks: bool,
    pub bullmq: bool,
    pub only: Vec<String>,
    pub out: Option<PathBuf>,
    pub bin: PathBuf,
    pub command: String,
}

/// The parts of a run, in order.
const PARTS: [&str; 6] = ["drain", "lateness", "pushpop", "idle", "worker", "lifecycle"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn parse_args() -> Result<Opts, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let root = root();
    let mut o = Opts {
        quick,
        backlog: if quick { 100_000 } else { 1_000_000 },
        lateness_secs: if quick { 5 } else { 20 },
        rate: 5000,
        ops: if quick { 5000 } else { 20_000 },
        bulk_ops: if quick { 20_000 } else { 100_000 },
        idle_secs: if quick { 5 } else { 10 },
        worker_jobs: 100_000,
        sdks: true,
        bullmq: true,
        only: PARTS.iter().map(|p| p.to_string()).collect(),
        out: (!quick).then(|| root.join("bench/RESULTS.md")),
        bin: root.join("target/release/delayer"),
        command: std::env::var("BENCH_COMMAND")
            .unwrap_or_else(|_| format!("target/release/delayer-bench {}", args.join(" ")).trim().to_string()),
    };
    let mut explicit_out = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            let v = it.next().ok_or(format!("{name} needs a value"))?;
            v.replace('_', "")
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("{name}: {v:?} is not a positive number"))
        };
        match a.as_str() {
            "--quick" => {}
            "--backlog" => o.backlog = num(a)?,
            "--lateness-secs" => o.lateness_secs = num(a)?,
            "--rate" => o.rate = num(a)?,
            "--ops" => o.ops = num(a)?,
            "--bulk-ops" => o.bulk_ops = num(a)?,
            "--idle-secs" => o.idle_secs = num(a)?,
            "--worker-jobs" => o.worker_jobs = num(a)?,
            "--no-sdks" => o.sdks = false,
            "--no-bullmq" => o.bullmq = false,
            "--no-out" => o.out = None,
            "--only" => {
                let list = it.next().ok_or("--only needs a list")?;
                o.only = list.split(',').map(|p| p.trim().to_string()).collect();
                if let Some(bad) = o.only.iter().find(|p| !PARTS.contains(&p.as_str())) {
                    return Err(format!("--only: unknown part {bad:?}"));
                }
            }
            "--out" => {
                o.out = Some(PathBuf::from(it.next().ok_or("--out needs a file")?));
                explicit_out = true;
            }
            "--delayer-bin" => o.bin = PathBuf::from(it.next().ok_or("--delayer-bin needs a file")?),
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other:?}\n\n{USAGE}")),
        }
    }
    if o.only.len() < PARTS.len() && !explicit_out {
        o.out = None; // a partial run does not replace the full report
    }
    Ok(o)
}

fn step(started: Instant, what: &str) {
    eprintln!("[{:6.1}s] {what}", started.elapsed().as_secs_f64());
}

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("delayer-bench: {e}");
            std::process::exit(2);
        }
    };
    let bin = opts.bin.display().to_string();
    if !opts.bin.exists() {
        eprintln!("delayer-bench: no server binary at {bin} (cargo build --release -p delayer-server)");
        std::process::exit(2);
    }
    let started = Instant::now();
    let machine = sys::Machine::probe();
    let redis = RedisServer::start();
    step(started, &format!("redis-server {} on port {}", machine.redis_version, redis.port()));
    let d = Delayer::open(&redis.url()).expect("client");

    let mut sizes: Vec<u64> = [10_000, 100_000, 1_000_000].into_iter().filter(|n| *n < opts.backlog).collect();
    sizes.push(opts.backlog);
    let largest = opts.backlog;
    let run = |part: &str| opts.only.iter().any(|p| p == part);
    let mut drains = Vec::new();
    for &n in sizes.iter().filter(|_| run("drain")) {
        step(started, &format!("drain {n}: bare move.lua loop"));
        let bare = drain::bare(&redis, &d, n, n == largest);
        step(started, &format!("drain {n}: delayer server"));
        let server = drain::server(&redis, &d, &bin, n, n == largest);
        step(
            started,
            &format!(
                "drain {n}: server {:.0} jobs/s, bare {:.0} jobs/s ({:.0} %), RSS {} kB",
                server.rate(),
                bare.rate(),
                100.0 * server.rate() / bare.rate(),
                server.rss_peak_kb
            ),
        );
        drains.push((bare, server));
    }

    let mut late = Vec::new();
    for sc in lateness::scenarios(opts.rate, opts.lateness_secs).into_iter().filter(|_| run("lateness")) {
        step(started, &format!("lateness, {}: Delayer, {}", sc.label, sc.describe()));
        let ours = lateness::run(&redis, &bin, sc);
        let peer = opts.bullmq.then(|| {
            step(started, &format!("lateness, {}: BullMQ", sc.label));
            bullmq::run(&redis, &root(), sc)
        });
        late.push((ours, peer));
    }

    let mut sdks = Vec::new();
    if run("pushpop") {
        step(started, "push/pop: Rust SDK");
        sdks.push(pushpop::rust(&redis, opts.ops, opts.bulk_ops));
    }
    if opts.sdks && run("pushpop") {
        let root = root();
        for sdk in ["Python", "PHP"] {
            step(started, &format!("push/pop: {sdk} SDK"));
            sdks.push(pushpop::script(&redis, &root, sdk, opts.ops));
        }
    }

    let idle = run("idle").then(|| {
        step(started, &format!("idle: {} s", opts.idle_secs));
        idle::run(&redis, &bin, opts.idle_secs)
    });

    let throughput = run("worker").then(|| {
        step(started, &format!("worker throughput: {} jobs, Rust and Python Workers and BullMQ", opts.worker_jobs));
        throughput::run(&redis, &root(), opts.worker_jobs, opts.bullmq)
    });

    let lifecycle = run("lifecycle").then(|| {
        step(started, "lifecycle cost: bench/lifecycle_cost.py (Delayer both layouts, BullMQ)");
        lifecycle::run(&root(), &opts.bin, opts.quick, opts.bullmq)
    });

    let results = report::Results {
        opts: &opts,
        machine,
        loadavg_end: sys::loadavg(),
        wall_secs: started.elapsed().as_secs_f64(),
        drains,
        late,
        sdks,
        idle,
        throughput,
        lifecycle,
    };
    let (table, markdown) = report::render(&results);
    println!("{table}");
    if let Some(out) = &opts.out {
        match std::fs::write(out, markdown) {
            Ok(()) => eprintln!("wrote {}", out.display()),
            Err(e) => eprintln!("delayer-bench: cannot write {}: {e}", out.display()),
        }
    }
}
