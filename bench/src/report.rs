//! The report: one table for the terminal, the same in markdown with the
//! date, the machine, the command and a timing breakdown.

use crate::bullmq::Peer;
use crate::drain::{Bare, Drain};
use crate::idle::Idle;
use crate::lateness::Lateness;
use crate::pushpop::SdkRates;
use crate::stats::Summary;
use crate::sys::Machine;
use crate::throughput::{self, Throughput};
use crate::Opts;

pub struct Results<'a> {
    pub opts: &'a Opts,
    pub machine: Machine,
    pub loadavg_end: String,
    pub wall_secs: f64,
    pub drains: Vec<(Bare, Drain)>,
    /// Each lateness scenario: Delayer, and BullMQ unless --no-bullmq.
    pub late: Vec<(Lateness, Option<Peer>)>,
    pub sdks: Vec<SdkRates>,
    pub idle: Option<Idle>,
    pub throughput: Option<Throughput>,
    /// bench/lifecycle_cost.py's markdown, or why it did not run.
    pub lifecycle: Option<Result<String, String>>,
}

/// Targets (see bench/README.md).
const DRAIN_RATIO_MIN: f64 = 0.70;
const LATE_P99_MAX_MS: f64 = 10.0;
const RSS_MAX_KB: u64 = 20 * 1024;
const PING_P99_MAX_MS: f64 = 5.0;
const IDLE_CPU_MAX_PCT: f64 = 1.0;
const BULK_PUSH_MIN: f64 = 100_000.0;
const WORKER_VS_BULLMQ_MIN: f64 = 2.0;

struct Row {
    what: String,
    value: String,
    target: String,
    verdict: &'static str,
}

fn row(what: impl Into<String>, value: impl Into<String>) -> Row {
    Row { what: what.into(), value: value.into(), target: String::new(), verdict: "" }
}

fn check(what: impl Into<String>, value: impl Into<String>, target: impl Into<String>, pass: bool) -> Row {
    Row { what: what.into(), value: value.into(), target: target.into(), verdict: if pass { "PASS" } else { "FAIL" } }
}

/// 1234567.8 -> "1,234,568"
pub fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

fn ms3(s: &Summary) -> String {
    if s.count == 0 {
        return "no samples".into();
    }
    format!("{:.2} / {:.2} / {:.2} ms (n={})", s.p50, s.p99, s.max, thousands(s.count as f64))
}

fn mib(kb: u64) -> String {
    format!("{:.1} MiB", kb as f64 / 1024.0)
}

fn rows(r: &Results) -> (Vec<Row>, Vec<String>) {
    let mut rows = Vec::new();
    drain_rows(r, &mut rows);
    for (ours, peer) in &r.late {
        lateness_rows(ours, peer.as_ref(), &mut rows);
    }
    sdk_rows(r, &mut rows);
    if let Some(i) = &r.idle {
        idle_rows(i, &mut rows);
    }
    if let Some(t) = &r.throughput {
        throughput_rows(t, &mut rows);
    }
    let verdicts =
        rows.iter().filter(|x| !x.verdict.is_empty()).map(|x| format!("{}: {}", x.verdict, x.what)).collect();
    (rows, verdicts)
}

fn drain_rows(r: &Results, rows: &mut Vec<Row>) {
    let Some((big_bare, big)) = r.drains.last() else { return };

    // 1. Drain, 2. the limit
    for (bare, d) in &r.drains {
        let n = thousands(d.n as f64);
        rows.push(row(
            format!("Drain {n}: delayer server"),
            format!(
                "{} jobs/s ({:.2} s; server CPU {:.2} s, {} threads)",
                thousands(d.rate()),
                d.secs,
                d.cpu_secs,
                d.threads
            ),
        ));
        rows.push(row(
            format!("Drain {n}: bare move.lua loop (limit)"),
            format!("{} jobs/s ({:.2} s)", thousands(bare.rate()), bare.secs),
        ));
        let ratio = d.rate() / bare.rate();
        if d.n == big.n {
            rows.push(check(
                format!("Drain {n}: server / limit"),
                format!("{:.0} %", ratio * 100.0),
                format!(">= {:.0} %", DRAIN_RATIO_MIN * 100.0),
                ratio >= DRAIN_RATIO_MIN,
            ));
        } else {
            rows.push(row(format!("Drain {n}: server / limit"), format!("{:.0} %", ratio * 100.0)));
        }
    }
    // Memory: peak RSS per backlog, and flatness.
    let rss: Vec<u64> = r.drains.iter().map(|(_, d)| d.rss_peak_kb).collect();
    for (_, d) in &r.drains {
        rows.push(check(
            format!("Server peak RSS (VmHWM), {} backlog", thousands(d.n as f64)),
            mib(d.rss_peak_kb),
            "<= 20 MiB",
            d.rss_peak_kb <= RSS_MAX_KB && d.rss_peak_kb > 0,
        ));
    }
    let (lo, hi) = (*rss.iter().min().unwrap_or(&0), *rss.iter().max().unwrap_or(&0));
    let growth = hi.saturating_sub(lo);
    let allowed = (lo / 10).max(1024);
    rows.push(check(
        format!("Server RSS flat, {} to {} backlog", thousands(r.drains[0].1.n as f64), thousands(big.n as f64)),
        format!("+{:.2} MiB ({} .. {})", growth as f64 / 1024.0, mib(lo), mib(hi)),
        "growth <= max(1 MiB, 10 %)",
        growth <= allowed,
    ));

    // 3. Responsiveness
    rows.push(check(
        format!("PING p50/p99/max during the {} server drain", thousands(big.n as f64)),
        ms3(&big.ping_ms),
        "p99 < 5 ms",
        big.ping_ms.count > 0 && big.ping_ms.p99 < PING_P99_MAX_MS,
    ));
    rows.push(row(
        format!("PING p50/p99/max during the {} bare loop (reference)", thousands(big.n as f64)),
        ms3(&big_bare.ping_ms),
    ));
    rows.push(row("Machine noise during that drain: 1 ms sleep oversleep p50/p99/max", ms3(&big.jitter_ms)));
    rows.push(row(
        format!("Rust push_many while filling the {} backlog", thousands(big.n as f64)),
        format!("{} jobs/s", thousands(big.n as f64 / big.fill_secs)),
    ));
}

fn lateness_rows(ours: &Lateness, peer: Option<&Peer>, rows: &mut Vec<Row>) {
    let sc = &ours.scenario;
    let name = sc.label;
    rows.push(row(
        format!("Lateness, {name}: {}", sc.describe()),
        format!(
            "Delayer: {} pushed (achieved {}/s), {} popped, {} early; server CPU {:.1} % of one core",
            thousands(ours.pushed as f64),
            thousands(ours.achieved_rate),
            thousands(ours.consumed as f64),
            ours.late.early,
            ours.server_cpu_pct
        ),
    ));
    let all_popped = ours.consumed == ours.pushed;
    let target = |what: String, s: &Summary| {
        check(what, ms3(s), "p99 <= 10 ms", s.count > 0 && s.p99 <= LATE_P99_MAX_MS && all_popped)
    };
    if sc.split {
        rows.push(row(format!("Delayer lateness p50/p99/max, {name}: all jobs"), ms3(&ours.late.all)));
        rows.push(target(format!("Delayer lateness p50/p99/max, {name}: due < 1 s ahead"), &ours.late.under_1s));
        rows.push(target(format!("Delayer lateness p50/p99/max, {name}: due >= 1 s ahead"), &ours.late.ahead_1s));
    } else {
        rows.push(target(format!("Delayer lateness p50/p99/max, {name}"), &ours.late.all));
    }
    rows.push(row(
        format!("Delayer, {name}: server move, oldest id per batch (its log), p50/p99/max"),
        ms3(&ours.move_ms),
    ));
    rows.push(row(
        format!("Machine noise, {name}, Delayer run: 1 ms sleep oversleep p50/p99/max"),
        ms3(&ours.jitter_ms),
    ));
    let Some(peer) = peer else { return };
    let theirs = match &peer.result {
        Ok(t) => t,
        Err(e) => {
            rows.push(row(format!("BullMQ, {name}"), format!("skipped: {e}")));
            return;
        }
    };
    rows.push(row(
        format!("BullMQ, {name}: same rate and delays, Worker concurrency 50"),
        format!(
            "{} added (achieved {}/s), {} processed, {} early; clock drift corrected {:.2} ms; noise p99 {:.2} ms",
            thousands(theirs.pushed as f64),
            thousands(theirs.achieved_rate),
            thousands(theirs.consumed as f64),
            theirs.late.early,
            theirs.clock_drift_ms,
            theirs.jitter_ms.p99
        ),
    ));
    if sc.split {
        rows.push(row(format!("BullMQ lateness p50/p99/max, {name}: all jobs"), ms3(&theirs.late.all)));
        rows.push(row(format!("BullMQ lateness p50/p99/max, {name}: due < 1 s ahead"), ms3(&theirs.late.under_1s)));
        rows.push(row(format!("BullMQ lateness p50/p99/max, {name}: due >= 1 s ahead"), ms3(&theirs.late.ahead_1s)));
    } else {
        rows.push(row(format!("BullMQ lateness p50/p99/max, {name}"), ms3(&theirs.late.all)));
    }
    let (a, b) = (&ours.late.all, &theirs.late.all);
    rows.push(check(
        format!("Delayer vs BullMQ, {name}: p50 and p99, all jobs"),
        format!("p50 {:.2} vs {:.2} ms, p99 {:.2} vs {:.2} ms", a.p50, b.p50, a.p99, b.p99),
        "Delayer lower on both",
        a.count > 0 && b.count > 0 && a.p50 < b.p50 && a.p99 < b.p99 && all_popped,
    ));
}

fn sdk_rows(r: &Results, rows: &mut Vec<Row>) {
    for s in &r.sdks {
        match &s.result {
            Ok(rates) => {
                rows.push(row(
                    format!("{} push, {} ops", s.sdk, thousands(s.ops as f64)),
                    format!("{} jobs/s", thousands(rates.push)),
                ));
                let what = format!("{} push_many, {} jobs", s.sdk, thousands(s.bulk_ops as f64));
                let value = format!("{} jobs/s", thousands(rates.push_many));
                if s.sdk == "Rust" {
                    rows.push(check(what, value, ">= 100,000 jobs/s", rates.push_many >= BULK_PUSH_MIN));
                } else {
                    rows.push(row(what, value));
                }
                rows.push(row(
                    format!("{} pop, {} ops", s.sdk, thousands(s.ops as f64)),
                    format!("{} jobs/s", thousands(rates.pop)),
                ));
                rows.push(row(
                    format!("{} bpop, {} ops", s.sdk, thousands(s.ops as f64)),
                    format!("{} jobs/s", thousands(rates.bpop)),
                ));
            }
            Err(e) => rows.push(row(format!("{} SDK", s.sdk), format!("skipped: {e}"))),
        }
        if let Some(l) = &s.limits {
            rows.push(row(
                format!("Round trip bound: raw PING, one client, {} sequential", thousands(s.ops as f64)),
                format!("{} /s", thousands(l.ping_rate)),
            ));
            rows.push(row(
                "Redis time per job in push_many (commandstats, push_many.lua)",
                format!("{:.1} us: Redis alone allows {} jobs/s", l.push_usec, thousands(1e6 / l.push_usec.max(0.001))),
            ));
        }
    }
}

fn throughput_rows(t: &Throughput, rows: &mut Vec<Row>) {
    let n = thousands(t.jobs as f64);
    for run in &t.runs {
        let what = format!(
            "Worker throughput, {n} no-op jobs due at once: {}, concurrency {}",
            run.name,
            throughput::CONCURRENCY
        );
        match &run.result {
            Ok(d) => {
                rows.push(row(what, format!("{} jobs/s ({:.2} s)", thousands(d.rate()), d.secs)));
                rows.push(row(format!("Another client's PING p50/p99/max during {}", run.name), ms3(&d.ping_ms)));
                let per_job = d.scripts.usec as f64 / d.jobs.max(1) as f64;
                rows.push(row(
                    format!("{}: script calls, Redis script time per job", run.name),
                    format!("{} calls, {per_job:.1} us/job", thousands(d.scripts.calls as f64)),
                ));
            }
            Err(e) => rows.push(row(what, format!("skipped: {e}"))),
        }
    }
    let Some(theirs) = t.rate(throughput::BULLMQ) else { return };
    for ours in throughput::OURS {
        if let Some(rate) = t.rate(ours) {
            let ratio = rate / theirs;
            rows.push(check(
                format!("Worker throughput: {ours} / BullMQ Worker"),
                format!("{ratio:.2}x"),
                format!(">= {WORKER_VS_BULLMQ_MIN:.0}x"),
                ratio >= WORKER_VS_BULLMQ_MIN,
            ));
        }
    }
}

fn idle_rows(i: &Idle, rows: &mut Vec<Row>) {
    rows.push(check(
        format!("Idle server CPU, {:.0} s, empty pool", i.secs),
        format!("{:.2} % of one core", i.cpu_pct),
        "< 1 %",
        i.cpu_pct < IDLE_CPU_MAX_PCT,
    ));
    let cmds: Vec<String> = i.sent.iter().map(|(c, n)| format!("{c} {n}")).collect();
    rows.push(row(
        "Idle server: Redis commands sent",
        format!(
            "{:.2}/s ({}); {:.2}/s executed incl. inside scripts; RSS {}",
            i.sent_per_sec,
            if cmds.is_empty() { "none".into() } else { cmds.join(", ") },
            i.executed_per_sec,
            mib(i.rss_kb)
        ),
    ));
}

/// Where the time of each drain went, per batch of 1000.
fn breakdown(r: &Results) -> Vec<[String; 8]> {
    let mut out = Vec::new();
    for (bare, d) in &r.drains {
        let n = thousands(d.n as f64);
        let b_batches = bare.batches.max(1) as f64;
        out.push([
            format!("{n}, bare loop"),
            format!("{:.3}", bare.secs),
            thousands(b_batches),
            format!("{:.3}", bare.secs * 1e3 / b_batches),
            format!("{:.3}", bare.evalsha_usec as f64 / 1e3 / b_batches),
            format!("{:.0} %", bare.evalsha_usec as f64 / 1e6 / bare.secs * 100.0),
            "-".into(),
            format!("{:.3}", (bare.secs * 1e6 - bare.evalsha_usec as f64) / 1e3 / b_batches),
        ]);
        let calls = d.evalsha_calls.max(1) as f64;
        out.push([
            format!("{n}, server (moving: {:.3} s)", d.secs_moving),
            format!("{:.3}", d.secs),
            thousands(calls),
            format!("{:.3}", d.secs * 1e3 / calls),
            format!("{:.3}", d.evalsha_usec as f64 / 1e3 / calls),
            format!("{:.0} %", d.evalsha_usec as f64 / 1e6 / d.secs * 100.0),
            format!("{:.3}", d.cpu_secs * 1e3 / calls),
            format!("{:.3}", (d.secs * 1e6 - d.evalsha_usec as f64) / 1e3 / calls),
        ]);
    }
    out
}

const BREAKDOWN_HEAD: [&str; 8] = [
    "drain",
    "wall s",
    "EVALSHA calls",
    "wall ms/call",
    "Redis script ms/call",
    "Redis busy",
    "server CPU ms/call",
    "outside script ms/call",
];

fn text_table(head: &[&str], body: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in body {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join(" | ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![line(head.iter().map(|s| s.to_string()).collect())];
    out.push(widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-+-"));
    out.extend(body.iter().map(|r| line(r.clone())));
    out.join("\n")
}

fn md_table(head: &[&str], body: &[Vec<String>]) -> String {
    let mut out = vec![
        format!("| {} |", head.join(" | ")),
        format!("|{}|", head.iter().map(|_| " --- ").collect::<Vec<_>>().join("|")),
    ];
    out.extend(body.iter().map(|r| format!("| {} |", r.join(" | "))));
    out.join("\n")
}

/// (terminal text, markdown file)
pub fn render(r: &Results) -> (String, String) {
    let (rows, verdicts) = rows(r);
    let body: Vec<Vec<String>> =
        rows.iter().map(|x| vec![x.what.clone(), x.value.clone(), x.target.clone(), x.verdict.to_string()]).collect();
    let head = ["Measurement", "Value", "Target", "Result"];
    let bd: Vec<Vec<String>> = breakdown(r).into_iter().map(|a| a.to_vec()).collect();
    let m = &r.machine;
    let machine = format!(
        "{} CPUs ({}), Linux {}, redis-server {}; load average {} at start, {} at end",
        m.nproc, m.cpu_model, m.kernel, m.redis_version, m.loadavg, r.loadavg_end
    );
    let mode = if r.opts.quick { "quick (smoke test)" } else { "full" };
    let passed = verdicts.iter().filter(|v| v.starts_with("PASS")).count();
    let summary = format!("{passed} of {} targets pass", verdicts.len());

    let text = format!(
        "Delayer benchmark, {mode} run, {date}\nMachine: {machine}\nCommand: {cmd}\nTook {wall:.0} s\n\n{table}\n\nWhere each drain's time went (per EVALSHA call = one batch of up to 1000):\n{bd}\n\n{summary}\n{verdicts}\n",
        date = m.date,
        cmd = r.opts.command,
        wall = r.wall_secs,
        table = text_table(&head, &body),
        bd = text_table(&BREAKDOWN_HEAD, &bd),
        verdicts = verdicts.join("\n"),
    );
    let md = format!(
        "# Delayer benchmark results\n\n\
         Written by `{cmd}` ({mode} run); see [README.md](README.md) for what each number means.\n\n\
         - Date: {date}\n- Machine: {machine}\n- Command: `{cmd}`\n- Run took {wall:.0} s\n\
         - Settings: timer_interval 1000 ms, batch_size 1000 (defaults); {topics} topics in the drains, {late_topics} in the lateness scenarios; 32-byte bodies\n\n\
         ## Results\n\n{table}\n\n**{summary}.**\n\n\
         ## Where each drain's time went\n\n\
         Per EVALSHA call (one batch of up to 1000 ids). \"Redis script\" is INFO commandstats `usec` for evalsha \
         divided by calls; \"outside script\" is wall time minus script time: round trips, the mover's own work, \
         and (server rows) process start-up and the poller's 2 ms granularity.\n\n{bd}\n",
        cmd = r.opts.command,
        date = m.date,
        wall = r.wall_secs,
        topics = crate::drain::TOPICS,
        late_topics = crate::lateness::TOPICS,
        table = md_table(&head, &body),
        bd = md_table(&BREAKDOWN_HEAD, &bd),
    );
    let lifecycle = match &r.lifecycle {
        None => String::new(),
        Some(Ok(table)) => table.clone(),
        Some(Err(why)) => format!("skipped: {why}"),
    };
    if lifecycle.is_empty() {
        return (text, md);
    }
    let text = format!("{text}\nLifecycle cost per job (bench/lifecycle_cost.py):\n{lifecycle}\n");
    let md = format!("{md}\n## Lifecycle cost per job\n\nbench/lifecycle_cost.py, on redis-servers of its own (see its doc).\n\n{lifecycle}\n");
    (text, md)
}
