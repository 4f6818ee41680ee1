//! The operator commands: `delayer stats`, `peek`, `job`, `list`, `push`,
//! `remove`, `reschedule`, `pause`, `resume` (`pause`), `limit` (`limit`) and `dead
//! list|requeue|purge`. They print through
//! `output` (a reader that hangs up ends nothing badly), and say refused
//! credentials as the server does (`credentials`).
//!
//! They reach Redis through `--url` (or `DELAYER_URL`), so an operator needs
//! no configuration file, or through the server's delayer.conf. Arguments
//! were checked while parsing; what fails here is Redis, or dead letters
//! that are not there, and each failure is reported as such, never the one
//! as the other.

use crate::admin::{limit, pause};
use crate::body;
use crate::cli::{self, Command, DeadCommand, ListState};
use crate::config::Config;
use crate::credentials;
use crate::fatal::Fatal;
use crate::inspect;
use crate::jobview;
use crate::migrate;
use crate::output;
use crate::{other_layout, other_prefix};
use delayer::inspect::JobState;
use delayer_protocol::calls::FlowAction;
use delayer_protocol::conf::RedisSettings;
use delayer_protocol::connection::Conn;
use delayer_protocol::keys::{Layout, Names};
use std::path::{Path, PathBuf};

/// The Redis and key prefix a command works on.
pub struct Target {
    redis: RedisSettings,
    /// The key prefix and layout (`--url` targets: the classic layout).
    names: Names,
    /// Where the settings came from: a file, or a URL (`--url`, `DELAYER_URL`).
    source: Source,
}

/// [`Target::source`].
enum Source {
    File(PathBuf),
    Url(&'static str),
}

impl Target {
    /// `--url` (with `--prefix`), else `DELAYER_URL` unless a file is named
    /// with `-c`, else the configuration file.
    pub fn resolve(url: Option<&str>, prefix: Option<&str>, configuration: Option<&Path>) -> Result<Target, Fatal> {
        let from_env = || std::env::var(cli::URL_ENV).ok().filter(|u| !u.is_empty());
        let (url, source) = match url {
            Some(url) => (Some(url.to_string()), "--url"),
            None if configuration.is_none() => (from_env(), cli::URL_ENV),
            None => (None, ""),
        };
        if let Some(url) = url {
            return Target::from_url(url, source, prefix);
        }
        if prefix.is_some() {
            return Err(Fatal::usage(format!(
                "--prefix goes with --url or {}; the configuration file has key_prefix",
                cli::URL_ENV
            )));
        }
        let config = Config::load(configuration)?;
        // A command's output is its answer: the notes go to stderr.
        config
            .notes
            .iter()
            .filter(|(level, _)| *level <= log::Level::Warn)
            .for_each(|(_, note)| output::error(format_args!("warning: {note}")));
        let names = Names::new(&config.key_prefix, config.layout);
        Ok(Target { redis: config.redis, names, source: Source::File(config.path) })
    }

    /// A URL given by `source`. Never echoed: it may hold a password.
    fn from_url(url: String, source: &'static str, prefix: Option<&str>) -> Result<Target, Fatal> {
        let scheme_ok = redis::parse_redis_url(&url)
            .is_some_and(|u| ["redis", "rediss", "unix", "redis+unix"].contains(&u.scheme()));
        if !scheme_ok {
            return Err(Fatal::usage(format!(
                "{source}: not a redis://, rediss:// or unix:// URL (redis://[user:password@]host:port/db)"
            )));
        }
        let redis = RedisSettings { url: Some(url), ..RedisSettings::default() };
        // Checked now, so a bad one is the command line's fault, not Redis's.
        redis.client().map_err(|e| Fatal::usage(format!("{source}: cannot use this URL: {e}")))?;
        let prefix = prefix.unwrap_or(delayer_protocol::keys::DEFAULT_PREFIX);
        Ok(Target { redis, names: Names::new(prefix, Layout::Classic), source: Source::Url(source) })
    }
}

/// Runs `command` against `target`: prints, and fails with what went wrong.
pub fn run(target: &Target, command: Command) -> Result<(), Fatal> {
    match command {
        Command::Stats { json } => {
            let mut conn = target.connect()?;
            let topics = target.client()?.stats().map_err(|e| target.sdk_failed(e))?;
            let stats = inspect::stats(&mut conn, &target.names, &topics).map_err(|e| target.failed(e))?;
            let (layout, prefix) = (target.names.layout(), target.names.prefix());
            let mut finder = other_prefix::Finder::new(prefix);
            let elsewhere = other_layout::look(&mut conn, layout, prefix, &mut finder, other_prefix::Budget::COMMAND)
                .map_err(|e| target.failed(e))?;
            if json {
                let mut v = stats.to_json();
                v["topics"] = jobview::topics_json(&topics);
                v["elsewhere"] = elsewhere.json(layout, prefix);
                v["elsewhere_searched_all"] = finder.scanned_all.into();
                output::line(v)?;
            } else {
                output::print(&stats.to_text())?;
                output::print(&jobview::topics_text(&topics))?;
                output::print(&other_layout::text(&elsewhere, layout, prefix, finder.scanned_all))?;
            }
        }
        Command::Peek { topic, count, json } => {
            delayer_protocol::keys::check_topic(&target.names, &topic).map_err(|e| target.sdk_failed(e.into()))?;
            let mut conn = target.connect()?;
            let jobs = inspect::peek(&mut conn, &target.names, &topic, count).map_err(|e| target.failed(e))?;
            if json {
                output::line(inspect::peek_json(&jobs))?;
            } else {
                output::print(&inspect::peek_text(&topic, &jobs))?;
            }
        }
        Command::Dead { action } => dead_letters(target, action)?,
        Command::Migrate { to } => {
            let to = match to {
                cli::LayoutArg::Classic => Layout::Classic,
                cli::LayoutArg::Topic => Layout::Topic,
            };
            if target.redis.cluster.is_some() {
                return Err(Fatal::usage(migrate::ON_A_CLUSTER));
            }
            let mut conn = target.connect()?;
            let report = migrate::run(&mut conn, target.names.prefix(), to).map_err(|e| target.failed(e))?;
            output::print(&report.to_text())?;
            if !report.complete() {
                return Err(Fatal::failed(report.advice()));
            }
        }
        // Not an operator command: main runs it (webhook::run), with -c only.
        Command::Webhook => return Err(Fatal::usage("delayer webhook is not run against a --url")),
        Command::Health { .. } => return Err(Fatal::usage("delayer health asks the server, not Redis")),
        Command::Config { .. } => return Err(Fatal::usage("delayer config is not run against a --url")),
        Command::Job { topic, id, body: with_body, json } => {
            let job = target.client()?.job_raw(&topic, &id.0).map_err(|e| target.sdk_failed(e))?;
            let fetched = match job.body_size {
                Some(size) if with_body && job.topic.as_deref() == Some(topic.as_str()) => {
                    let mut conn = target.connect()?;
                    Some(body::fetch(&mut conn, &target.names, &topic, &id.0, size).map_err(|e| target.failed(e))?)
                }
                _ => None,
            };
            if json {
                let mut v = jobview::job_json(&job);
                if let Some(fetched) = &fetched {
                    body::put_json(&mut v, fetched);
                }
                output::line(v)?;
            } else {
                let mut text = jobview::job_text(&topic, &job, std::time::SystemTime::now());
                text.push_str(&fetched.as_ref().map(body::text).unwrap_or_default());
                output::print(&text)?;
            }
        }
        Command::Push { topic, id, delay, body, body_file } => {
            let body = body::read(body, body_file.as_deref())?;
            let job = delayer::Job::new(topic, id, delay).body(body);
            let due = target.client()?.push_job(&job).map_err(|e| target.sdk_failed(e))?;
            output::line(format_args!("pushed job {:?} to topic {:?}: {}", job.id, job.topic, due_text(due)))?;
        }
        Command::List { topic, state, count, cursor, json } => list(target, &topic, state, count, cursor, json)?,
        Command::Pause(which) => pause::run(target, FlowAction::Pause, which)?,
        Command::Resume(which) => pause::run(target, FlowAction::Resume, which)?,
        Command::Limit(which) => limit::run(target, which)?,
        Command::Remove { topic, id } => {
            let client = target.client()?;
            of_topic(target, &client, &topic, &id.0)?;
            client.remove_in_raw(&topic, &id.0).map_err(|e| target.sdk_failed(e))?;
            output::line(format_args!("removed job {:?} of topic {topic:?}", String::from_utf8_lossy(&id.0)))?;
        }
        Command::Reschedule { topic, id, delay } => {
            let client = target.client()?;
            let state = of_topic(target, &client, &topic, &id.0)?;
            let due = client.reschedule_in_raw(&topic, &id.0, delay).map_err(|e| target.sdk_failed(e))?;
            let id = String::from_utf8_lossy(&id.0);
            match due {
                Some(due) => output::line(format_args!("job {id:?} of topic {topic:?} is {}", due_text(due)))?,
                None => {
                    return Err(Fatal::failed(format!(
                        "job {id:?} of topic {topic:?} is {state}, not waiting: only a scheduled job can be rescheduled"
                    )))
                }
            }
        }
    }
    Ok(())
}

/// "due <time> (in 5 min)", or "(now)" for a delay of 0 (or a negative one).
/// The distance is from this machine's clock; the time is Redis's.
fn due_text(due: std::time::SystemTime) -> String {
    let due = jobview::unix(due);
    let left = due - jobview::unix(std::time::SystemTime::now());
    let rel = if left > 0.5 { format!("in {}", jobview::human_seconds(left)) } else { "now".into() };
    format!("due {} ({rel})", jobview::rfc3339(due))
}

/// The state of job `id` when it is one of `topic`'s, else the error that
/// it is not (so a command never touches another topic's job by mistake).
fn of_topic(target: &Target, client: &delayer::Delayer, topic: &str, id: &[u8]) -> Result<JobState, Fatal> {
    let job = client.job_raw(topic, id).map_err(|e| target.sdk_failed(e))?;
    if job.state == JobState::Unknown {
        return Err(Fatal::failed(format!("no job {:?} on topic {topic:?}", String::from_utf8_lossy(id))));
    }
    Ok(job.state)
}

/// `delayer list`: one page of a topic's jobs in one state.
fn list(target: &Target, topic: &str, state: ListState, count: usize, cursor: u64, json: bool) -> Result<(), Fatal> {
    let client = target.client()?;
    let failed = |e| target.sdk_failed(e);
    let now = std::time::SystemTime::now();
    let out = match state {
        ListState::Scheduled | ListState::Reserved => {
            let (page, field) = if state == ListState::Scheduled {
                (client.list_scheduled(topic, cursor, count).map_err(failed)?, "due")
            } else {
                (client.list_reserved_with_deadlines(topic, cursor, count).map_err(failed)?, "deadline")
            };
            if json {
                jobview::timed_json(&page, field).to_string() + "\n"
            } else {
                jobview::timed_text(field, &page, now)
            }
        }
        ListState::Ready => {
            let page = client.list_ready_raw(topic, cursor, count).map_err(failed)?;
            if json {
                jobview::ids_json(&page).to_string() + "\n"
            } else {
                jobview::ids_text(&page)
            }
        }
        ListState::Dead => {
            let start = usize::try_from(cursor).map_err(|_| Fatal::usage(format!("cursor {cursor} is too large")))?;
            let letters = client.dead_letters(topic, start, count).map_err(failed)?;
            // dead.lua skips stale entries, so a short page is no proof of the end.
            let next = (!letters.is_empty()).then_some(cursor + count as u64);
            if json {
                serde_json::json!({ "items": inspect::dead_json(&letters), "next": next }).to_string() + "\n"
            } else {
                inspect::dead_text(topic, &letters) + &jobview::next_text(letters.is_empty(), next)
            }
        }
    };
    output::print(&out)?;
    Ok(())
}

impl Target {
    pub(crate) fn failed(&self, e: impl std::fmt::Display) -> Fatal {
        self.refused(&e, credentials::refused_text(&e.to_string()))
            .unwrap_or_else(|| Fatal::failed(format!("reading from redis at {}: {e}", self.redis.describe())))
    }

    /// Refused credentials, said as the server says them (`refused`: they
    /// were), naming the settings to change.
    fn refused(&self, e: &dyn std::fmt::Display, refused: bool) -> Option<Fatal> {
        let source = match &self.source {
            Source::File(path) => credentials::Source::File(path),
            Source::Url(given_by) => credentials::Source::Url(given_by),
        };
        refused.then(|| Fatal::failed(credentials::refused_message(&self.redis.describe(), e, &source)))
    }

    /// Connects once (to the cluster in cluster mode), every reply bounded.
    fn connect(&self) -> Result<Conn, Fatal> {
        let settings = &self.redis;
        let target = settings.target().map_err(|e| Fatal::usage(format!("cannot use these redis settings: {e}")))?;
        let failed = |e: redis::RedisError| {
            self.refused(&e, credentials::refused(&e))
                .unwrap_or_else(|| Fatal::failed(format!("cannot reach redis at {}: {e}", settings.describe())))
        };
        let conn = target.connect(delayer_protocol::connection::DEFAULT_CONNECT_TIMEOUT).map_err(failed)?;
        // A stalled Redis fails the command after REDIS_TIMEOUT, not never.
        let timeout = Some(crate::config::REDIS_TIMEOUT);
        conn.set_read_timeout(timeout).and_then(|()| conn.set_write_timeout(timeout)).map_err(failed)?;
        Ok(conn)
    }

    /// A one-connection SDK client for the deployment (one Redis, the
    /// master the sentinels name, or every node of a cluster).
    pub(crate) fn client(&self) -> Result<delayer::Delayer, Fatal> {
        // One connection first, so refused credentials or a Redis that is
        // down fail at once, said as `connect` says them, not after the
        // pool has retried for its connect timeout.
        drop(self.connect()?);
        let target = self.redis.target().map_err(|e| Fatal::usage(format!("cannot use these redis settings: {e}")))?;
        // Every reply bounded: a stalled Redis fails the command, not hangs it.
        let pool =
            delayer::PoolOptions { max_size: 1, io_timeout: Some(crate::config::REDIS_TIMEOUT), ..Default::default() };
        delayer::Delayer::with_target(target, self.names.prefix(), &pool)
            .with_layout(self.names.layout())
            .map_err(|e| Fatal::usage(e.to_string()))
    }

    /// An SDK error: an argument it refused is the command line's fault.
    pub(crate) fn sdk_failed(&self, e: delayer::Error) -> Fatal {
        let refused = match &e {
            delayer::Error::InvalidArgument(why) => return Fatal::usage(why.clone()),
            delayer::Error::Redis(e) => credentials::refused(e),
            other => other.is_refused_credentials() || credentials::refused_text(&other.to_string()),
        };
        self.refused(&e, refused).unwrap_or_else(|| Fatal::failed(format!("redis at {}: {e}", self.redis.describe())))
    }
}

/// `delayer dead list|requeue|purge`, through the SDK (it owns dead.lua).
fn dead_letters(target: &Target, action: DeadCommand) -> Result<(), Fatal> {
    let delayer = target.client()?;
    let (which, purge) = match action {
        DeadCommand::List { topic, count, start, json } => {
            let letters = delayer.dead_letters(&topic, start, count).map_err(|e| target.sdk_failed(e))?;
            if json {
                output::line(inspect::dead_json(&letters))?;
            } else {
                output::print(&inspect::dead_text(&topic, &letters))?;
            }
            return Ok(());
        }
        DeadCommand::Requeue(which) => (which, false),
        DeadCommand::Purge(which) => (which, true),
    };
    let take = |ids: Option<&[&[u8]]>| {
        let done = match (ids, purge) {
            (None, true) => delayer.purge_dead(&which.topic, None),
            (None, false) => delayer.requeue_dead(&which.topic, None),
            (Some(ids), true) => delayer.purge_dead_raw(&which.topic, ids),
            (Some(ids), false) => delayer.requeue_dead_raw(&which.topic, ids),
        };
        done.map_err(|e| target.sdk_failed(e))
    };
    let verb = if purge { "purged" } else { "re-queued" };
    if which.all {
        output::line(format_args!("{verb} {} dead letter(s) of {:?}", take(None)?, which.topic))?;
        return Ok(());
    }
    // One id per call: each call tells whether that id was a dead letter.
    let mut done = 0;
    let mut missing = Vec::new();
    for id in unique(&which.ids) {
        match take(Some(&[id]))? {
            0 => missing.push(id),
            n => done += n,
        }
    }
    output::line(format_args!("{verb} {done} dead letter(s) of {:?}", which.topic))?;
    if missing.is_empty() {
        Ok(())
    } else {
        // Quoted: an id may hold spaces.
        let missing: Vec<String> = missing.iter().map(|id| format!("{:?}", String::from_utf8_lossy(id))).collect();
        Err(Fatal::failed(format!("not dead letters of topic {:?}: {}", which.topic, missing.join(" "))))
    }
}

/// `ids` without repeats, in the order given.
fn unique(ids: &[cli::RawId]) -> Vec<&[u8]> {
    let mut seen = std::collections::HashSet::new();
    ids.iter().map(|id| id.0.as_slice()).filter(|id| seen.insert(*id)).collect()
}
