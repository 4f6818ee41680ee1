//! The environment over the file (12-factor configuration): every key of
//! `[delayer]` is `DELAYER_<KEY>` and every key of `[redis]` is
//! `DELAYER_REDIS_<KEY>` (`DELAYER_HTTP_ADDR`, `DELAYER_REDIS_PASSWORD`);
//! with `_FILE` appended the value is read from the file named
//! (`DELAYER_REDIS_PASSWORD_FILE`, for secrets mounted as files), its
//! trailing newlines dropped. Setting both is an error. The address is one
//! setting made of two forms: a `DELAYER_REDIS_URL` replaces the file's
//! `host`/`port`/`database`, and any of those from the environment replaces
//! the file's `url` (else a file written for one form could not be pointed
//! elsewhere by the other).
//!
//! `delayer webhook`'s sections too: `DELAYER_WEBHOOK_<topic>_<KEY>` sets
//! `[webhook.<topic>] <key>` (`DELAYER_WEBHOOK_orders_URL`,
//! `DELAYER_WEBHOOK_orders_SECRET_FILE`; the topic as written), so it also
//! runs with no file.
//!
//! The values are laid over the parsed file ([`ConfFile::set`]) before
//! anything is checked, so one parsing path checks file and environment
//! alike and an error about a value from here names its variable. The
//! server and this SDK share this code; the Python and PHP readers apply
//! the same rule (the cases in `conformance/env_cases.json` hold them
//! together).

use super::file::{ConfError, ConfFile, Source};
use super::rules::{closest, KNOWN_KEYS, WEBHOOK_KEYS};
use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;

/// Every variable starts with this.
pub const PREFIX: &str = "DELAYER_";

/// Largest `_FILE` read: a secret or a short value, never a whole disk.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// `DELAYER_` names the project uses for other things (the CLI's Redis
/// URL, test harnesses): never taken for a misspelt setting.
pub const OTHER_VARS: &[&str] = &[
    "DELAYER_URL",
    "DELAYER_PREFIX",
    "DELAYER_BIN",
    "DELAYER_DRIVER_BIN",
    "DELAYER_TEST_PANIC",
    "DELAYER_TEST_DIR",
    "DELAYER_PYTHON",
    "DELAYER_PHP_SRC",
    "DELAYER_PHP_AUTOLOAD",
    "DELAYER_AUTOLOAD",
    "DELAYER_KEYS",
    "DELAYER_HOST",
    "DELAYER_PORT",
    "DELAYER_TOKEN",
    "DELAYER_CONFIG",
    "DELAYER_WORKER_INSTANCE",
    "DELAYER_COMPAT_HOST",
    "DELAYER_COMPAT_PORT",
    "DELAYER_COMPAT_CLOSED_PORT",
];

/// The variable that sets `key` of `[section]` (`[delayer]` or `[redis]`).
pub fn var_name(section: &str, key: &str) -> String {
    match section {
        "delayer" => format!("{PREFIX}{}", key.to_ascii_uppercase()),
        _ => format!("{PREFIX}{}_{}", section.to_ascii_uppercase(), key.to_ascii_uppercase()),
    }
}

/// Every (variable, section, key) the environment may set.
pub fn settable() -> impl Iterator<Item = (String, &'static str, &'static str)> {
    KNOWN_KEYS.iter().flat_map(|(section, keys)| keys.iter().map(move |key| (var_name(section, key), *section, *key)))
}

/// Lays the process's environment over `file`; see [`overlay`].
pub fn apply(file: &mut ConfFile) -> Result<Vec<String>, ConfError> {
    overlay(file, std::env::vars_os())
}

/// Lays `vars` over `file`: each settable variable (or its `_FILE`) sets
/// its key. Returns a warning for each `DELAYER_*` name that is not one but
/// is close to one (a likely typo: "did you mean ...?"); other names are
/// left alone, as other tools may share the prefix.
pub fn overlay(
    file: &mut ConfFile,
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<Vec<String>, ConfError> {
    let vars: Vec<(String, OsString)> = vars
        .into_iter()
        .filter_map(|(name, value)| name.into_string().ok().map(|name| (name, value)))
        .filter(|(name, _)| name.get(..PREFIX.len()).is_some_and(|p| p.eq_ignore_ascii_case(PREFIX)))
        .collect();
    let lookup = |name: &str| vars.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let mut known: Vec<String> = Vec::new();
    for (var, section, key) in settable() {
        let file_var = format!("{var}_FILE");
        let error = |name: &str, message: String| ConfError {
            file: PathBuf::from(name),
            section: Some(section.to_string()),
            key: Some(key.to_string()),
            line: None,
            message,
        };
        let (value, source) = match (lookup(&var), lookup(&file_var)) {
            (None, None) => (None, None),
            (Some(_), Some(_)) => {
                return Err(error(&file_var, format!("{var} is set too; set one of them, not both")));
            }
            (Some(value), None) => {
                let value = value.to_str().ok_or_else(|| error(&var, "is not valid UTF-8".into()))?;
                (Some(value.to_string()), Some(Source::Env(var.clone())))
            }
            (None, Some(path)) => {
                let path = PathBuf::from(path);
                let value = read_value(&path).map_err(|why| error(&file_var, why))?;
                let path = std::path::absolute(&path).unwrap_or(path);
                (Some(value), Some(Source::EnvFile(file_var.clone(), path)))
            }
        };
        if let (Some(value), Some(source)) = (value, source) {
            file.set(section, key, value, source);
        }
        known.push(var);
        known.push(file_var);
    }
    for (name, value) in &vars {
        if let Some((topic, key)) = webhook_var(name) {
            let section = format!("webhook.{topic}");
            let value = value.to_str().ok_or_else(|| ConfError {
                file: PathBuf::from(name),
                section: Some(section.clone()),
                key: Some(key.to_string()),
                line: None,
                message: "is not valid UTF-8".into(),
            })?;
            file.set(&section, key, value.to_string(), Source::Env(name.clone()));
            known.push(name.clone());
        }
    }
    replace_address(file);
    Ok(misspelt(vars.iter().map(|(name, _)| name.as_str()), &known))
}

/// `DELAYER_WEBHOOK_<topic>_<KEY>` as (topic, key of `[webhook.<topic>]`).
fn webhook_var(name: &str) -> Option<(&str, &'static str)> {
    let rest = name.strip_prefix("DELAYER_WEBHOOK_")?;
    WEBHOOK_KEYS.iter().find_map(|key| {
        let topic = rest.strip_suffix(key.to_ascii_uppercase().as_str())?.strip_suffix('_')?;
        (!topic.is_empty()).then_some((topic, *key))
    })
}

/// The keys of the address's two forms.
const URL_FORM: &[&str] = &["url"];
const HOST_FORM: &[&str] = &["host", "port", "database"];

/// Drops the file's form of the address when the environment gave the
/// other one.
fn replace_address(file: &mut ConfFile) {
    let from_env = |file: &ConfFile, keys: &[&str]| {
        keys.iter().any(|k| matches!(file.source("redis", k), Some(Source::Env(_) | Source::EnvFile(..))))
    };
    for (given, other) in [(URL_FORM, HOST_FORM), (HOST_FORM, URL_FORM)] {
        if from_env(file, given) {
            for key in other {
                if file.source("redis", key) == Some(Source::File) {
                    file.unset("redis", key);
                }
            }
        }
    }
}

/// The value in the file at `path`, its trailing newlines dropped; why
/// not, naming the path but never what the file holds. (Also for
/// `delayer webhook`'s `secret_file`.)
pub fn read_value(path: &std::path::Path) -> Result<String, String> {
    if path.as_os_str().is_empty() {
        return Err("is empty: it names the file to read the value from".into());
    }
    let shown = path.display();
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("{shown} is larger than {MAX_FILE_BYTES} bytes"));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("{shown} is not UTF-8 text"))?;
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}

/// A warning for each of `names` that is not in `known` nor
/// [`OTHER_VARS`] but close to a known one (compared after the prefix,
/// ignoring case), sorted.
fn misspelt<'a>(names: impl Iterator<Item = &'a str>, known: &[String]) -> Vec<String> {
    let suffixes: Vec<&str> = known.iter().map(|k| &k[PREFIX.len()..]).collect();
    let mut warnings: Vec<String> = names
        .filter(|name| !known.iter().any(|k| k == name) && !OTHER_VARS.contains(name))
        .filter_map(|name| {
            let suffix = name[PREFIX.len()..].to_ascii_uppercase();
            closest(&suffix, &suffixes).map(|near| {
                format!("environment variable {name} is not a Delayer setting and is ignored (did you mean {PREFIX}{near}?)")
            })
        })
        .collect();
    warnings.sort();
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    #[test]
    fn names_follow_the_sections() {
        assert_eq!(var_name("delayer", "http_addr"), "DELAYER_HTTP_ADDR");
        assert_eq!(var_name("redis", "password"), "DELAYER_REDIS_PASSWORD");
        // No [delayer] key is spelt like a [redis] one's variable, nor like a
        // name the project uses for something else.
        let all: Vec<String> = settable().map(|(v, _, _)| v).collect();
        let mut unique = all.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), all.len());
        assert!(OTHER_VARS.iter().all(|o| !all.iter().any(|v| v == o)));
    }

    #[test]
    fn the_environment_beats_the_file_and_errors_name_the_variable() {
        let mut file = ConfFile::parse("/d/delayer.conf".into(), "[redis]\nport = 1\nhost = h\n").expect("parses");
        let warnings = overlay(&mut file, env(&[("DELAYER_REDIS_PORT", "2"), ("PATH", "/bin")])).expect("overlay");
        assert!(warnings.is_empty());
        assert_eq!((file.get("redis", "port"), file.get("redis", "host")), (Some("2"), Some("h")));
        assert_eq!(file.source("redis", "port"), Some(Source::Env("DELAYER_REDIS_PORT".into())));
        assert_eq!(file.source("redis", "host"), Some(Source::File));
        assert_eq!(file.source("redis", "database"), None);
        let e = file.error(Some("redis"), Some("port"), "bad");
        assert_eq!(e.to_string(), "DELAYER_REDIS_PORT: [redis] port: bad");
    }

    #[test]
    fn file_variables_are_read_trimmed_and_exclusive() {
        let dir = std::env::temp_dir().join(format!("delayer-env-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let secret = dir.join("pw");
        std::fs::write(&secret, "s3cret\n\n").expect("write");
        let path = secret.to_str().expect("utf-8");
        let mut file = ConfFile::none("(none)".into());
        overlay(&mut file, env(&[("DELAYER_REDIS_PASSWORD_FILE", path)])).expect("overlay");
        assert_eq!(file.get("redis", "password"), Some("s3cret"));
        assert_eq!(
            file.source("redis", "password"),
            Some(Source::EnvFile("DELAYER_REDIS_PASSWORD_FILE".into(), secret.clone()))
        );
        let both = env(&[("DELAYER_REDIS_PASSWORD_FILE", path), ("DELAYER_REDIS_PASSWORD", "x")]);
        let e = overlay(&mut ConfFile::none("(none)".into()), both).expect_err("both");
        assert!(
            e.to_string()
                .starts_with("DELAYER_REDIS_PASSWORD_FILE: [redis] password: DELAYER_REDIS_PASSWORD is set too"),
            "{e}"
        );
        let missing = dir.join("missing");
        let e = overlay(
            &mut ConfFile::none("(none)".into()),
            env(&[("DELAYER_HTTP_TOKEN_FILE", missing.to_str().expect("utf-8"))]),
        )
        .expect_err("unreadable");
        assert!(
            e.to_string().starts_with(&format!(
                "DELAYER_HTTP_TOKEN_FILE: [delayer] http_token: cannot read {}",
                missing.display()
            )),
            "{e}"
        );
        std::fs::write(&secret, vec![b'x'; MAX_FILE_BYTES as usize + 1]).expect("write");
        let e = overlay(&mut ConfFile::none("(none)".into()), env(&[("DELAYER_REDIS_PASSWORD_FILE", path)]))
            .expect_err("huge");
        assert!(e.to_string().contains("larger than"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn webhook_sections_come_from_their_variables() {
        let mut file = ConfFile::none("(none)".into());
        let vars = env(&[
            ("DELAYER_WEBHOOK_close_order_URL", "http://127.0.0.1:1/h"),
            ("DELAYER_WEBHOOK_close_order_SECRET_FILE", "/run/secrets/hook"),
            ("DELAYER_WEBHOOK_SMS_TTR", "60"),
            ("DELAYER_WEBHOOK__URL", "http://x/"),
        ]);
        assert!(overlay(&mut file, vars).expect("overlay").is_empty());
        assert_eq!(file.get("webhook.close_order", "url"), Some("http://127.0.0.1:1/h"));
        assert_eq!(file.get("webhook.close_order", "secret_file"), Some("/run/secrets/hook"));
        assert_eq!(file.get("webhook.close_order", "secret"), None);
        assert_eq!(file.get("webhook.SMS", "ttr"), Some("60"));
        assert_eq!(file.sections().filter(|s| s.starts_with("webhook.")).count(), 2, "no empty topic");
        let e = file.error(Some("webhook.SMS"), Some("ttr"), "bad");
        assert_eq!(e.to_string(), "DELAYER_WEBHOOK_SMS_TTR: [webhook.SMS] ttr: bad");
    }

    #[test]
    fn close_misspellings_are_warned_about_others_are_not() {
        let vars = env(&[
            ("DELAYER_HTTP_ADR", "127.0.0.1:1"),
            ("DELAYER_REDIS_PASWORD", "x"),
            ("delayer_layout", "topic"),
            ("DELAYER_URL", "redis://127.0.0.1:1"),
            ("DELAYER_TEST_PANIC", "1"),
            ("DELAYER_SOMETHING_ELSE_ENTIRELY", "1"),
        ]);
        let mut file = ConfFile::none("(none)".into());
        let warnings = overlay(&mut file, vars).expect("overlay");
        assert_eq!(
            warnings,
            [
                "environment variable DELAYER_HTTP_ADR is not a Delayer setting and is ignored (did you mean DELAYER_HTTP_ADDR?)",
                "environment variable DELAYER_REDIS_PASWORD is not a Delayer setting and is ignored (did you mean DELAYER_REDIS_PASSWORD?)",
                "environment variable delayer_layout is not a Delayer setting and is ignored (did you mean DELAYER_LAYOUT?)",
            ]
        );
        assert_eq!(file.get("delayer", "http_addr"), None);
        // Every name the project uses for something else passes silently.
        let others: Vec<(&str, &str)> = OTHER_VARS.iter().map(|v| (*v, "1")).collect();
        assert_eq!(overlay(&mut ConfFile::none("(none)".into()), env(&others)).expect("overlay"), Vec::<String>::new());
    }
}
