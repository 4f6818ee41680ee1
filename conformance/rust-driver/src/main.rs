//! The Rust SDK behind the conformance suite's line protocol
//! (conformance/README.md): one JSON request per line on stdin, one JSON
//! response per line on stdout.
//!
//! Usage: `delayer-conformance-driver --url redis://127.0.0.1:PORT/ --prefix delayer:`
//! (or env `DELAYER_URL`, `DELAYER_PREFIX`). `delayer-conformance-driver
//! worker ...` runs a Worker instead (`worker_mode`).
//!
//! The crate depends on `delayer` only (and tokio, the SDK's own, for the
//! async Worker; no serde), so the little JSON and base64 it needs are
//! written out here.

use delayer::{Backoff, DeadLetter, Delayer, Error, Job, JobRef, Message, Reserved};
use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::time::{Duration, UNIX_EPOCH};

mod flow_ops;
mod worker_mode;

fn main() {
    if std::env::args().nth(1).as_deref() == Some("worker") {
        return worker_mode::main();
    }
    let mut url = std::env::var("DELAYER_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/0".into());
    let mut prefix = std::env::var("DELAYER_PREFIX").unwrap_or_else(|_| "delayer:".into());
    // A delayer.conf instead of --url/--prefix (sentinel mode, for one).
    let mut config: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--url" => url = args.next().expect("--url needs a value"),
            "--prefix" => prefix = args.next().expect("--prefix needs a value"),
            "--config" => config = Some(args.next().expect("--config needs a value")),
            other => {
                eprintln!("unknown argument {other:?}");
                std::process::exit(2);
            }
        }
    }
    let opened = match &config {
        Some(path) => Delayer::from_conf(path),
        None => Delayer::open(&url).map(|c| c.with_prefix(&prefix)),
    };
    let client = match opened {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot open the client ({}): {e}", config.as_deref().unwrap_or(&url));
            std::process::exit(1);
        }
    };
    let stdin = io::stdin();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for line in stdin.lock().lines() {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                eprintln!("stdin: {e}");
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let response = match Json::parse(&line) {
            Ok(Json::Object(req)) => handle(&client, &req),
            Ok(_) => failure("other", "request must be a JSON object"),
            Err(e) => failure("other", &format!("bad JSON request: {e}")),
        };
        if writeln!(out, "{response}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
}

type Req = BTreeMap<String, Json>;

fn handle(client: &Delayer, req: &Req) -> String {
    match run(client, req) {
        Ok(fields) => {
            let mut s = String::from("{\"ok\":true");
            for (k, v) in fields {
                s.push(',');
                s.push_str(&json_string(k));
                s.push(':');
                s.push_str(&v);
            }
            s.push('}');
            s
        }
        Err((kind, msg)) => failure(kind, &msg),
    }
}

type Fail = (&'static str, String);

fn sdk_err(e: Error) -> Fail {
    let kind = match e {
        Error::InvalidArgument(_) => "invalid_argument",
        Error::Connection(_) => "connection",
        Error::Config(_) => "config",
        _ => "other",
    };
    (kind, e.to_string())
}

fn bad(msg: impl Into<String>) -> Fail {
    ("other", msg.into())
}

/// The id a request names as bytes: `id_b64` (any bytes), else `id`.
fn raw_id(req: &Req) -> Result<Option<Vec<u8>>, Fail> {
    match req.get("id_b64") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Str(s)) => b64_decode(s).map(Some).map_err(|e| bad(format!("id_b64: {e}"))),
        _ => Err(bad("id_b64 must be a string")),
    }
}

/// The reservation a request names: `id` (or the bytes `raw`, from
/// `id_b64`), and `receipt` (null: any current one).
fn job_ref<'a>(req: &'a Req, raw: Option<&'a [u8]>) -> Result<JobRef<'a>, Fail> {
    let id = match raw {
        Some(raw) => JobRef::raw(raw),
        None => JobRef::from(str_field(req, "id")?),
    };
    let job = match req.get("receipt") {
        None | Some(Json::Null) => id,
        Some(Json::Str(r)) => id.receipt(r),
        _ => return Err(bad("receipt must be a string or null")),
    };
    Ok(match topic_field(req)? {
        Some(topic) => job.in_topic(topic),
        None => job,
    })
}

/// The optional "topic" of the calls that name a job by id.
fn topic_field(req: &Req) -> Result<Option<&str>, Fail> {
    match req.get("topic") {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Str(t)) => Ok(Some(t)),
        _ => Err(bad("topic must be a string or null")),
    }
}

fn str_field<'a>(req: &'a Req, key: &str) -> Result<&'a str, Fail> {
    match req.get(key) {
        Some(Json::Str(s)) => Ok(s),
        _ => Err(bad(format!("request needs a string {key:?}"))),
    }
}

fn num_field(req: &Req, key: &str) -> Result<Option<f64>, Fail> {
    match req.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Num(n)) => Ok(Some(*n)),
        _ => Err(bad(format!("{key:?} must be a number"))),
    }
}

/// A JSON number of milliseconds (or seconds, with `scale` 1000) as a
/// `Duration`. The Rust SDK takes `Duration`, which cannot hold a negative
/// (or non-finite) value: such a request is answered as the invalid argument
/// it is, by the driver, since it cannot even be passed to the SDK.
fn duration(what: &str, value: f64, ms_per_unit: f64) -> Result<Duration, Fail> {
    let secs = value * ms_per_unit / 1000.0;
    Duration::try_from_secs_f64(secs).map_err(|e| {
        (
            "invalid_argument",
            format!("driver: {what} {value} cannot be passed to the Rust SDK (std::time::Duration: {e})"),
        )
    })
}

/// Milliseconds as a `Duration`, exactly when they are a whole number.
fn ms_duration(what: &str, ms: f64) -> Result<Duration, Fail> {
    if ms.fract() == 0.0 && (0.0..1.8e19).contains(&ms) {
        Ok(Duration::from_millis(ms as u64))
    } else {
        duration(what, ms, 1.0)
    }
}

fn run(client: &Delayer, req: &Req) -> Result<Vec<(&'static str, String)>, Fail> {
    let op = str_field(req, "op")?;
    if let Some(answer) = flow_ops::run(client, op, req) {
        return answer;
    }
    match op {
        "push" => {
            let job = job_of(req)?;
            match client.push_job(&job) {
                Ok(due) => Ok(vec![("due", format!("{:.3}", unix(due)))]),
                Err(Error::IdTaken(t)) => {
                    let first = t.taken.first().ok_or_else(|| bad("IdTaken without a taken id"))?;
                    Ok(vec![(
                        "taken",
                        format!("{{\"topic\":{},\"due\":{}}}", json_string(&first.topic), time_or_null(first.due)),
                    )])
                }
                Err(e) => Err(sdk_err(e)),
            }
        }
        "push_many" => {
            let Some(Json::Array(items)) = req.get("jobs") else { return Err(bad("push_many needs a jobs list")) };
            let jobs = items
                .iter()
                .map(|j| match j {
                    Json::Object(j) => {
                        let mut j = j.clone();
                        j.insert("if_absent".into(), req.get("if_absent").cloned().unwrap_or(Json::Null));
                        job_of(&j)
                    }
                    _ => Err(bad("each job must be an object")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let (due, taken) = match client.push_many(&jobs) {
                Ok(due) => (due.into_iter().map(Some).collect(), Vec::new()),
                Err(Error::IdTaken(t)) => (t.due, t.taken),
                Err(e) => return Err(sdk_err(e)),
            };
            let due: Vec<String> = due.into_iter().map(time_or_null).collect();
            let taken: Vec<String> = taken
                .iter()
                .map(|t| {
                    format!(
                        "{{\"id\":{},\"topic\":{},\"due\":{}}}",
                        json_string(&t.id),
                        json_string(&t.topic),
                        time_or_null(t.due)
                    )
                })
                .collect();
            Ok(vec![("due", format!("[{}]", due.join(","))), ("taken", format!("[{}]", taken.join(",")))])
        }
        "pop" => {
            let topic = str_field(req, "topic")?;
            let job = client.pop(topic).map_err(sdk_err)?;
            Ok(vec![("job", message_json(job))])
        }
        "bpop" => {
            let topic = str_field(req, "topic")?;
            let timeout_ms = num_field(req, "timeout_ms")?.ok_or_else(|| bad("bpop needs timeout_ms"))?;
            let job = client.bpop(topic, ms_duration("timeout_ms", timeout_ms)?).map_err(sdk_err)?;
            Ok(vec![("job", message_json(job))])
        }
        "remove" if req.contains_key("id_b64") => {
            let raw = raw_id(req)?.unwrap_or_default();
            let removed = client.remove_in_raw(topic_field(req)?.unwrap_or(""), &raw).map_err(sdk_err)?;
            Ok(vec![("removed", removed.to_string())])
        }
        "remove" => {
            let id = str_field(req, "id")?;
            let removed = match topic_field(req)? {
                Some(topic) => client.remove_in(topic, id),
                None => client.remove(id),
            }
            .map_err(sdk_err)?;
            Ok(vec![("removed", removed.to_string())])
        }
        "reserve" => {
            let ttr = ms_duration("ttr_ms", num_field(req, "ttr_ms")?.ok_or_else(|| bad("reserve needs ttr_ms"))?)?;
            let job = client.reserve(str_field(req, "topic")?, ttr).map_err(sdk_err)?;
            Ok(vec![("job", reserved_json(job))])
        }
        "breserve" => {
            let ttr = ms_duration("ttr_ms", num_field(req, "ttr_ms")?.ok_or_else(|| bad("breserve needs ttr_ms"))?)?;
            let timeout_ms = num_field(req, "timeout_ms")?.ok_or_else(|| bad("breserve needs timeout_ms"))?;
            let timeout = ms_duration("timeout_ms", timeout_ms)?;
            let job = client.breserve(str_field(req, "topic")?, ttr, timeout).map_err(sdk_err)?;
            Ok(vec![("job", reserved_json(job))])
        }
        "ack" | "release" | "bury" => {
            let raw = raw_id(req)?;
            let job = job_ref(req, raw.as_deref())?;
            let done = match op {
                "ack" => client.ack(job),
                "bury" => client.bury(job),
                _ => {
                    let delay = num_field(req, "delay_ms")?.map(|ms| ms_duration("delay_ms", ms)).transpose()?;
                    client.release(job, delay)
                }
            }
            .map_err(sdk_err)?;
            Ok(vec![("done", done.to_string())])
        }
        "touch" => {
            let ttr = ms_duration("ttr_ms", num_field(req, "ttr_ms")?.ok_or_else(|| bad("touch needs ttr_ms"))?)?;
            let raw = raw_id(req)?;
            let deadline = client.touch(job_ref(req, raw.as_deref())?, ttr).map_err(sdk_err)?;
            Ok(vec![("deadline", deadline.map_or("null".into(), |t| format!("{:.3}", unix(t))))])
        }
        "reschedule" => {
            let delay_ms = num_field(req, "delay_ms")?.ok_or_else(|| bad("reschedule needs delay_ms"))?;
            let (id, delay) = (str_field(req, "id")?, ms_duration("delay_ms", delay_ms)?);
            let due = match topic_field(req)? {
                Some(topic) => client.reschedule_in(topic, id, delay),
                None => client.reschedule(id, delay),
            }
            .map_err(sdk_err)?;
            Ok(vec![("due", due.map_or("null".into(), |t| format!("{:.3}", unix(t))))])
        }
        "dead_list" => {
            let start = whole("start", num_field(req, "start")?.unwrap_or(0.0))?;
            let count = whole("count", num_field(req, "count")?.unwrap_or(100.0))?;
            let dead =
                client.dead_letters(str_field(req, "topic")?, start as usize, count as usize).map_err(sdk_err)?;
            Ok(vec![("dead", format!("[{}]", dead.iter().map(dead_json).collect::<Vec<_>>().join(",")))])
        }
        "requeue_dead" | "purge_dead" if req.contains_key("ids_b64") => {
            let topic = str_field(req, "topic")?;
            let Some(Json::Array(items)) = req.get("ids_b64") else { return Err(bad("ids_b64 must be a list")) };
            let ids = items
                .iter()
                .map(|i| match i {
                    Json::Str(s) => b64_decode(s).map_err(|e| bad(format!("ids_b64: {e}"))),
                    _ => Err(bad("ids_b64 must be strings")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let ids: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
            let n = if op == "purge_dead" {
                client.purge_dead_raw(topic, &ids)
            } else {
                client.requeue_dead_raw(topic, &ids)
            }
            .map_err(sdk_err)?;
            Ok(vec![("count", n.to_string())])
        }
        "requeue_dead" | "purge_dead" => {
            let topic = str_field(req, "topic")?;
            let ids: Option<Vec<&str>> = match req.get("ids") {
                None | Some(Json::Null) => None,
                Some(Json::Array(items)) => Some(
                    items
                        .iter()
                        .map(|i| match i {
                            Json::Str(s) => Ok(s.as_str()),
                            _ => Err(bad("ids must be strings")),
                        })
                        .collect::<Result<_, _>>()?,
                ),
                _ => return Err(bad("ids must be a list or null")),
            };
            let n = if op == "purge_dead" {
                client.purge_dead(topic, ids.as_deref())
            } else {
                client.requeue_dead(topic, ids.as_deref())
            }
            .map_err(sdk_err)?;
            Ok(vec![("count", n.to_string())])
        }
        "job" => {
            let info = match raw_id(req)? {
                Some(raw) => client.job_raw(str_field(req, "topic")?, &raw),
                None => client.job(str_field(req, "topic")?, str_field(req, "id")?),
            }
            .map_err(sdk_err)?;
            Ok(vec![("job", job_info_json(&info))])
        }
        "read_config" => {
            let client = Delayer::from_conf(str_field(req, "path")?).map_err(sdk_err)?;
            Ok(vec![("prefix", json_string(client.keys().prefix()))])
        }
        other => Err(bad(format!("unknown op {other:?}"))),
    }
}

/// The job a push request (or one of push_many's jobs) describes.
fn job_of(req: &Req) -> Result<Job, Fail> {
    if req.contains_key("id_b64") {
        // Job::new takes the id as a String: the Rust SDK pushes UTF-8 ids only.
        return Err(("invalid_argument", "driver: the Rust SDK pushes ids as text (id_b64 cannot be written)".into()));
    }
    let topic = str_field(req, "topic")?;
    let id = str_field(req, "id")?;
    let delay_ms = num_field(req, "delay_ms")?.ok_or_else(|| bad("push needs delay_ms"))?;
    let body = match req.get("body_b64") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Str(s)) => b64_decode(s).map_err(|e| bad(format!("body_b64: {e}")))?,
        _ => return Err(bad("body_b64 must be a string")),
    };
    let mut job = Job::new(topic, id, ms_duration("delay_ms", delay_ms)?).body(body);
    if let Some(life) = num_field(req, "ready_max_lifetime_s")? {
        job = job.ready_max_lifetime(duration("ready_max_lifetime_s", life, 1000.0)?);
    }
    if let Some(n) = num_field(req, "max_attempts")? {
        job = job.max_attempts(whole("max_attempts", n)?);
    }
    match req.get("backoff") {
        None | Some(Json::Null) => {}
        Some(Json::Object(b)) => job = job.backoff(backoff(b)?),
        _ => return Err(bad("backoff must be an object")),
    }
    match req.get("if_absent") {
        None | Some(Json::Null) | Some(Json::Bool(false)) => {}
        Some(Json::Bool(true)) => job = job.if_absent(),
        _ => return Err(bad("if_absent must be a boolean")),
    }
    match req.get("traceparent") {
        None | Some(Json::Null) => {}
        Some(Json::Str(s)) => job = job.traceparent(s.clone()),
        _ => return Err(bad("traceparent must be a string")),
    }
    Ok(job)
}

/// A JSON string, or null.
fn text_or_null(s: &Option<String>) -> String {
    s.as_deref().map_or("null".into(), json_string)
}

/// Unix seconds with milliseconds, or null.
fn time_or_null(t: Option<std::time::SystemTime>) -> String {
    t.map_or("null".into(), |t| format!("{:.3}", unix(t)))
}

/// A JSON number as a whole u32; anything else cannot be passed to the Rust
/// SDK, which takes u32 counts, and is answered as the invalid argument it is.
fn whole(what: &str, n: f64) -> Result<u32, Fail> {
    if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) {
        Ok(n as u32)
    } else {
        Err(("invalid_argument", format!("driver: {what} {n} cannot be passed to the Rust SDK (u32)")))
    }
}

fn backoff(b: &Req) -> Result<Backoff, Fail> {
    let ms = |key: &str| -> Result<Duration, Fail> {
        ms_duration(key, num_field(b, key)?.ok_or_else(|| bad(format!("backoff needs {key}")))?)
    };
    match str_field(b, "kind")? {
        "fixed" => Ok(Backoff::fixed(ms("delay_ms")?)),
        "exponential" => Ok(Backoff::exponential(ms("base_ms")?, ms("max_ms")?)),
        other => Err(bad(format!("unknown backoff kind {other:?}"))),
    }
}

fn unix(t: std::time::SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn reserved_json(job: Option<Reserved>) -> String {
    match job {
        None => "null".into(),
        Some(j) => format!(
            "{{\"id\":{},\"id_b64\":{},\"topic\":{},\"body_b64\":{},\"attempts\":{},\"max_attempts\":{},\"receipt\":{},\"deadline\":{:.3},\"traceparent\":{}}}",
            json_string(&j.id),
            json_string(&b64_encode(j.id_bytes())),
            json_string(&j.topic),
            json_string(&b64_encode(&j.body)),
            j.attempts,
            j.max_attempts,
            json_string(&j.receipt),
            unix(j.deadline),
            text_or_null(&j.traceparent)
        ),
    }
}

/// The "job" op's answer: the lookup of issue 13, every field, null when absent.
fn job_info_json(j: &delayer::inspect::JobInfo) -> String {
    let text = |s: &Option<String>| s.as_deref().map_or("null".into(), json_string);
    let num = |n: Option<u64>| n.map_or("null".into(), |n| n.to_string());
    format!(
        "{{{},\"state\":{},\"topic\":{},\"body_size\":{},\"attempts\":{},\"max_attempts\":{},\"due\":{},\"deadline\":{},\"dead_at\":{},\"dead_reason\":{},\"last_error\":{},\"traceparent\":{},\"flow\":{}}}",
        // `delayer job --json`'s shape: an id that is not UTF-8 as id_base64.
        match &j.raw_id {
            Some(raw) => format!("\"id_base64\":{}", json_string(&b64_encode(raw))),
            None => format!("\"id\":{}", json_string(&j.id)),
        },
        json_string(j.state.as_str()),
        text(&j.topic),
        num(j.body_size),
        num(j.attempts),
        num(j.max_attempts),
        time_or_null(j.due),
        time_or_null(j.deadline),
        time_or_null(j.dead_at),
        text(&j.dead_reason),
        text(&j.last_error),
        text(&j.traceparent),
        json_string(j.flow.as_str())
    )
}

fn dead_json(d: &DeadLetter) -> String {
    format!(
        "{{\"id\":{},\"id_b64\":{},\"topic\":{},\"body_b64\":{},\"attempts\":{},\"reason\":{},\"dead_at\":{:.3},\"last_error\":{}}}",
        json_string(&d.id),
        json_string(&b64_encode(d.id_bytes())),
        json_string(&d.topic),
        json_string(&b64_encode(&d.body)),
        d.attempts,
        json_string(&d.reason),
        unix(d.dead_at),
        d.last_error.as_deref().map_or("null".to_string(), json_string)
    )
}

fn message_json(m: Option<Message>) -> String {
    match m {
        None => "null".into(),
        Some(m) => format!(
            "{{\"id\":{},\"id_b64\":{},\"topic\":{},\"body_b64\":{},\"traceparent\":{}}}",
            json_string(&m.id),
            json_string(&b64_encode(m.id_bytes())),
            json_string(&m.topic),
            json_string(&b64_encode(&m.body)),
            text_or_null(&m.traceparent)
        ),
    }
}

fn failure(kind: &str, msg: &str) -> String {
    format!("{{\"ok\":false,\"error\":{}}}", json_string(&format!("{kind}: {msg}")))
}

// ---------------------------------------------------------------- JSON

#[derive(Debug, Clone)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Array(Vec<Json>),
    Object(BTreeMap<String, Json>),
}

impl Json {
    fn parse(text: &str) -> Result<Json, String> {
        let mut p = Parser { s: text.as_bytes(), i: 0 };
        let v = p.value()?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("trailing characters at byte {}", p.i));
        }
        Ok(v)
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Result<(), String> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", c as char, self.i))
        }
    }

    fn lit(&mut self, word: &str, v: Json) -> Result<Json, String> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(format!("bad literal at byte {}", self.i))
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                let mut map = BTreeMap::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(Json::Object(map));
                }
                loop {
                    self.ws();
                    let k = self.string()?;
                    self.ws();
                    self.eat(b':')?;
                    let v = self.value()?;
                    map.insert(k, v);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Object(map));
                        }
                        _ => return Err(format!("expected ',' or '}}' at byte {}", self.i)),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value()?);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Array(items));
                        }
                        _ => return Err(format!("expected ',' or ']' at byte {}", self.i)),
                    }
                }
            }
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b't') => self.lit("true", Json::Bool(true)),
            Some(b'f') => self.lit("false", Json::Bool(false)),
            Some(b'n') => self.lit("null", Json::Null),
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                let start = self.i;
                while self.i < self.s.len() && matches!(self.s[self.i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
                text.parse::<f64>().map(Json::Num).map_err(|e| format!("bad number {text:?}: {e}"))
            }
            _ => Err(format!("unexpected input at byte {}", self.i)),
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self.s.get(self.i..self.i + 4).ok_or("short \\u escape")?;
        let h = std::str::from_utf8(h).map_err(|e| e.to_string())?;
        self.i += 4;
        u32::from_str_radix(h, 16).map_err(|e| e.to_string())
    }

    fn string(&mut self) -> Result<String, String> {
        self.eat(b'"')?;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let c = self.peek().ok_or("unterminated string")?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|e| e.to_string()),
                b'\\' => {
                    let e = self.peek().ok_or("unterminated escape")?;
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&hi) && self.s[self.i..].starts_with(b"\\u") {
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err("bad surrogate pair".into());
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            char::from_u32(cp).ok_or("lone surrogate in \\u escape")?
                        }
                        _ => return Err(format!("bad escape at byte {}", self.i)),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                _ => out.push(c),
            }
        }
    }
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// ---------------------------------------------------------------- base64

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn b64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(B64[(n >> 18) as usize & 63] as char);
        out.push(B64[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 { B64[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if chunk.len() > 2 { B64[n as usize & 63] as char } else { '=' });
    }
    out
}

fn b64_decode(text: &str) -> Result<Vec<u8>, String> {
    let s = text.as_bytes();
    if !s.len().is_multiple_of(4) {
        return Err("length is not a multiple of 4".into());
    }
    let val = |c: u8| -> Result<u32, String> {
        match c {
            b'A'..=b'Z' => Ok(u32::from(c - b'A')),
            b'a'..=b'z' => Ok(u32::from(c - b'a') + 26),
            b'0'..=b'9' => Ok(u32::from(c - b'0') + 52),
            b'+' => Ok(62),
            b'/' => Ok(63),
            _ => Err(format!("bad base64 character {:?}", c as char)),
        }
    };
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for (i, q) in s.chunks(4).enumerate() {
        let last = i == s.len() / 4 - 1;
        let pad = q.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return Err("misplaced padding".into());
        }
        let mut n = 0u32;
        for &c in &q[..4 - pad] {
            n = (n << 6) | val(c)?;
        }
        n <<= 6 * pad as u32;
        out.push((n >> 16) as u8);
        if pad < 2 {
            out.push((n >> 8) as u8);
        }
        if pad < 1 {
            out.push(n as u8);
        }
    }
    Ok(out)
}
