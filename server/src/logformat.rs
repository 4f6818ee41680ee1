//! The shape of a log line (`[delayer] log_format`), for the server and
//! `delayer webhook`, on every destination (the log files, stdout, stderr).
//!
//! `text` (the default) is 1.x's line, `[<RFC 3339 time>] [LEVEL] message`,
//! kept byte for byte for the scripts that read it. `json` is one object per
//! line for a log pipeline: `ts` (RFC 3339, UTC, milliseconds), `level`
//! (lowercase), `target` (the module), `msg` (the text line's message), then
//! the call's structured fields (`log`'s key-values: `topic`, `moved`,
//! `late_ms`, ...). The line is written by serde_json, so whatever a
//! message or field holds (a topic name with quotes or newlines, bytes
//! that were not UTF-8, decoded with U+FFFD) comes out escaped, one line,
//! valid JSON. A field named `<name>_json` carries JSON our code wrote
//! (the summary's per-topic counts): it is embedded as `<name>`'s value,
//! once it parses, else kept as a string.

use log::kv::{self, Key, Value, VisitSource, VisitValue};
use log::Record;
use serde_json::Value as Json;
use std::fmt;
use std::time::SystemTime;

/// `[delayer] log_format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl LogFormat {
    /// The key's value (`text`, `json`; empty means the default).
    pub fn parse(value: &str) -> Option<LogFormat> {
        match value {
            "" | "text" => Some(LogFormat::Text),
            "json" => Some(LogFormat::Json),
            _ => None,
        }
    }

    /// The line for `record`, whose message is `message`, logged at `now`.
    pub fn line(self, now: SystemTime, message: &fmt::Arguments, record: &Record) -> String {
        let ts = humantime::format_rfc3339_millis(now);
        match self {
            LogFormat::Text => format!("[{ts}] [{}] {message}", record.level()),
            LogFormat::Json => json_line(&ts.to_string(), message, record),
        }
    }
}

/// The target as the binary's modules had it before the server became a
/// library (`delayer::mover`, not `delayer_server::engine::mover`): log
/// queries and alerts select on it, and a module's tree is no part of it.
fn shown_target(target: &str) -> std::borrow::Cow<'_, str> {
    match target.strip_prefix("delayer_server") {
        Some(rest) => {
            let rest = ["::engine", "::admin"].iter().find_map(|tree| rest.strip_prefix(tree)).unwrap_or(rest);
            format!("delayer{rest}").into()
        }
        None => target.into(),
    }
}

fn json_line(ts: &str, message: &fmt::Arguments, record: &Record) -> String {
    let mut pairs: Vec<(String, Json)> = vec![
        ("ts".into(), Json::from(ts)),
        ("level".into(), Json::from(record.level().as_str().to_ascii_lowercase())),
        ("target".into(), Json::from(shown_target(record.target()))),
        ("msg".into(), Json::from(message.to_string())),
    ];
    let mut fields = Fields(Vec::new());
    // Collecting never fails (the visitor does not).
    let _ = record.key_values().visit(&mut fields);
    for (mut key, value) in fields.0 {
        // A field named as one already written (the line's own `msg`, say)
        // becomes `field_<name>`: nothing is overwritten, no key repeats.
        while pairs.iter().any(|(k, _)| *k == key) {
            key = format!("field_{key}");
        }
        pairs.push((key, value));
    }
    // Written pair by pair, in this order (ts first, as a reader wants),
    // each piece by serde_json.
    let mut out = String::with_capacity(160);
    out.push('{');
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Json::from(key.as_str()).to_string());
        out.push(':');
        out.push_str(&value.to_string());
    }
    out.push('}');
    out
}

/// A record's fields as JSON values, in call order.
struct Fields(Vec<(String, Json)>);

impl<'kvs> VisitSource<'kvs> for Fields {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), kv::Error> {
        let mut json = ToJson(Json::Null);
        if value.visit(&mut json).is_err() {
            json.0 = Json::from(value.to_string());
        }
        let key = key.as_str();
        match key.strip_suffix("_json") {
            Some(name) if !name.is_empty() => {
                let embedded = json.0.as_str().and_then(|text| serde_json::from_str::<Json>(text).ok());
                match embedded {
                    Some(parsed) => self.0.push((name.to_string(), parsed)),
                    None => self.0.push((key.to_string(), json.0)),
                }
            }
            _ => self.0.push((key.to_string(), json.0)),
        }
        Ok(())
    }
}

/// One value as JSON: numbers and booleans as such (a float that JSON
/// cannot hold, NaN or infinite, as null), anything else as its text.
struct ToJson(Json);

impl<'v> VisitValue<'v> for ToJson {
    fn visit_any(&mut self, value: Value) -> Result<(), kv::Error> {
        self.0 = Json::from(value.to_string());
        Ok(())
    }

    fn visit_null(&mut self) -> Result<(), kv::Error> {
        self.0 = Json::Null;
        Ok(())
    }

    fn visit_u64(&mut self, value: u64) -> Result<(), kv::Error> {
        self.0 = Json::from(value);
        Ok(())
    }

    fn visit_i64(&mut self, value: i64) -> Result<(), kv::Error> {
        self.0 = Json::from(value);
        Ok(())
    }

    fn visit_f64(&mut self, value: f64) -> Result<(), kv::Error> {
        self.0 = Json::from(value);
        Ok(())
    }

    fn visit_bool(&mut self, value: bool) -> Result<(), kv::Error> {
        self.0 = Json::from(value);
        Ok(())
    }

    fn visit_str(&mut self, value: &str) -> Result<(), kv::Error> {
        self.0 = Json::from(value);
        Ok(())
    }

    fn visit_char(&mut self, value: char) -> Result<(), kv::Error> {
        self.0 = Json::from(value.to_string());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn line(format: LogFormat, record: &Record) -> String {
        let at = UNIX_EPOCH + Duration::from_millis(1_764_093_600_123);
        format.line(at, record.args(), record)
    }

    #[test]
    fn text_is_the_1x_line() {
        let args = format_args!("moved 3 [mail=3]");
        let record = Record::builder().args(args).level(log::Level::Info).target("delayer::mover").build();
        assert_eq!(line(LogFormat::Text, &record), "[2025-11-25T18:00:00.123Z] [INFO] moved 3 [mail=3]");
    }

    #[test]
    fn json_is_one_valid_object_whatever_the_strings_hold() {
        let hostile = "a\"b\\c\nd\u{0}e\u{fffd}\u{2028}}";
        let kvs: &[(&str, Value)] = &[
            ("topic", Value::from(hostile)),
            ("moved", Value::from(3u64)),
            ("late_ms", Value::from(1.5f64)),
            ("nan", Value::from(f64::NAN)),
            ("msg", Value::from("a field named as the line's own")),
            ("per_topic_json", Value::from("{\"mail\": 3}")),
            ("broken_json", Value::from("{not json")),
        ];
        let args = format_args!("moved 3 [{hostile}=3]");
        let record =
            Record::builder().args(args).level(log::Level::Warn).target("delayer::mover").key_values(&kvs).build();
        let text = line(LogFormat::Json, &record);
        assert!(!text.contains('\n'), "one line: {text}");
        assert!(text.starts_with("{\"ts\":\"2025-11-25T18:00:00.123Z\",\"level\":\"warn\""), "{text}");
        let v: Json = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(v["msg"], format!("moved 3 [{hostile}=3]"));
        assert_eq!(v["target"], "delayer::mover");
        assert_eq!(
            (v["topic"].as_str(), v["moved"].as_u64(), v["late_ms"].as_f64()),
            (Some(hostile), Some(3), Some(1.5))
        );
        assert_eq!(v["nan"], Json::Null);
        assert_eq!(v["field_msg"], "a field named as the line's own");
        assert_eq!(v["per_topic"], serde_json::json!({"mail": 3}));
        assert_eq!(v["broken_json"], "{not json");
    }

    #[test]
    fn targets_are_the_modules_without_the_library_and_its_trees() {
        assert_eq!(shown_target("delayer_server::engine::mover"), "delayer::mover");
        assert_eq!(shown_target("delayer_server::admin::commands"), "delayer::commands");
        assert_eq!(shown_target("delayer_server::http::listen"), "delayer::http::listen");
        assert_eq!(shown_target("delayer_server::server"), "delayer::server");
        assert_eq!(shown_target("delayer"), "delayer");
        assert_eq!(shown_target("r2d2"), "r2d2");
    }

    #[test]
    fn only_text_and_json_are_formats() {
        assert_eq!(LogFormat::parse(""), Some(LogFormat::Text));
        assert_eq!(LogFormat::parse("text"), Some(LogFormat::Text));
        assert_eq!(LogFormat::parse("json"), Some(LogFormat::Json));
        assert_eq!(LogFormat::parse("JSON"), None);
        assert_eq!(LogFormat::parse("logfmt"), None);
    }
}
