//! `delayer-conformance-driver worker [--aio] ...`: the Rust Workers (threads,
//! or tokio tasks) behind the worker conformance test
//! (test_conformance_worker.py; the protocol is in ../README.md, "The worker
//! drivers"). Runs one Worker on `--topic` until SIGTERM, writing one JSON
//! line per event on stdout; the handler does what the job's body says.

use delayer::worker::{Delivery, Event};
use std::io::Write;
use std::time::Duration;

struct Args {
    aio: bool,
    url: String,
    prefix: String,
    layout: delayer::Layout,
    topic: String,
    concurrency: usize,
    ttr: Duration,
    grace: Duration,
}

fn args() -> Args {
    let mut a = Args {
        aio: false,
        url: "redis://127.0.0.1:6379/0".into(),
        prefix: "delayer:".into(),
        layout: delayer::Layout::Classic,
        topic: String::new(),
        concurrency: 4,
        ttr: Duration::from_secs(60),
        grace: Duration::from_secs(25),
    };
    let mut it = std::env::args().skip(2);
    let ms = |v: Option<String>| Duration::from_millis(v.and_then(|v| v.parse().ok()).expect("a number of ms"));
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--aio" => a.aio = true,
            "--url" => a.url = it.next().expect("--url needs a value"),
            "--prefix" => a.prefix = it.next().expect("--prefix needs a value"),
            "--layout" => {
                a.layout = match it.next().as_deref() {
                    Some("topic") => delayer::Layout::Topic,
                    _ => delayer::Layout::Classic,
                }
            }
            "--topic" => a.topic = it.next().expect("--topic needs a value"),
            "--concurrency" => a.concurrency = it.next().and_then(|v| v.parse().ok()).expect("a count"),
            "--ttr-ms" => a.ttr = ms(it.next()),
            "--grace-ms" => a.grace = ms(it.next()),
            other => panic!("unknown worker argument {other:?}"),
        }
    }
    a
}

fn emit(ev: &str, fields: &[(&str, String)]) {
    let mut line = format!("{{\"ev\":{}", crate::json_string(ev));
    for (k, v) in fields {
        line.push_str(&format!(",{}:{v}", crate::json_string(k)));
    }
    line.push('}');
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|_| out.flush());
}

fn job(d: &Delivery) -> [(&'static str, String); 2] {
    [("id", crate::json_string(&d.id)), ("attempts", d.attempts.to_string())]
}

/// Every event as a line; the `started` of a job whose id starts with
/// `hookfail` panics after its line.
fn record(e: &Event<'_>) {
    match e {
        Event::Started { delivery: d }
        | Event::Succeeded { delivery: d, .. }
        | Event::Failed { delivery: d, .. }
        | Event::Acked { delivery: d }
        | Event::NotHeld { delivery: d }
        | Event::Touched { delivery: d }
        | Event::ReleasedAtStop { delivery: d } => {
            emit(e.name(), &job(d));
            if matches!(e, Event::Started { .. }) && d.id.starts_with("hookfail") {
                panic!("a hook that fails");
            }
        }
        Event::ConnectionLost { retry_in, .. } => emit(e.name(), &[("retry_in", retry_in.as_secs_f64().to_string())]),
        Event::Reconnected | Event::Stopping | Event::Stopped => emit(e.name(), &[]),
        _ => {}
    }
}

/// What the body says: an error, a panic, or how long to work first.
fn behave(d: &Delivery) -> Result<Duration, String> {
    let body = d.body_str().unwrap_or("");
    if body == "fail" || (body == "fail-once" && d.attempts == 1) {
        return Err("boom".into());
    }
    if body == "panic" {
        panic!("boom");
    }
    Ok(Duration::from_millis(body.strip_prefix("sleep:").and_then(|ms| ms.parse().ok()).unwrap_or(0)))
}

pub fn main() {
    let a = args();
    // A panicking handler or hook is part of the scenario: no backtrace noise.
    std::panic::set_hook(Box::new(|_| {}));
    let result = if a.aio {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
        runtime.block_on(async {
            let client = delayer::aio::Delayer::open(&a.url)
                .map(|c| c.with_prefix(&a.prefix))
                .and_then(|c| c.with_layout(a.layout))
                .unwrap_or_else(|e| {
                    eprintln!("cannot open the client: {e}");
                    std::process::exit(1)
                });
            let worker = delayer::worker::aio::Worker::new(client)
                .concurrency(a.concurrency)
                .ttr(a.ttr)
                .grace(a.grace)
                .hooks(record)
                .handle(&a.topic, |task: delayer::worker::aio::Task| async move {
                    let work = behave(&task)?;
                    tokio::time::sleep(work).await;
                    Ok::<(), String>(())
                });
            emit("running", &[]);
            worker.run_until(delayer::worker::aio::shutdown_signal()).await
        })
    } else {
        // A try at a Redis that refuses connections lasts the pool's whole
        // connect timeout (r2d2 tries again within it): 3 s by default, kept
        // short here so the outage scenario stays fast.
        let pool = delayer::PoolOptions { connect_timeout: Duration::from_millis(300), ..Default::default() };
        let client = redis::Client::open(a.url.as_str())
            .map_err(|e| delayer::Error::InvalidArgument(e.to_string()))
            .and_then(|c| delayer::Delayer::with_options(c, &a.prefix, &pool).with_layout(a.layout))
            .unwrap_or_else(|e| {
                eprintln!("cannot open the client: {e}");
                std::process::exit(1)
            });
        let worker = delayer::worker::Worker::new(client)
            .concurrency(a.concurrency)
            .ttr(a.ttr)
            .grace(a.grace)
            .hooks(record)
            .handle(&a.topic, |task: &delayer::worker::Task| {
                std::thread::sleep(behave(task)?);
                Ok::<(), String>(())
            });
        worker.stopper().stop_on_signals().expect("signal handlers");
        emit("running", &[]);
        worker.run()
    };
    if let Err(e) = result {
        eprintln!("worker: {e}");
        std::process::exit(1);
    }
}
