//! What a client takes from `delayer.conf`: how to reach Redis
//! ([`RedisSettings`]) and the key names ([`crate::keys`]); the server reads
//! the layout the same way ([`layout`], [`check_mode_and_layout`]).

use super::{env, reject_unknown, ConfError, ConfFile, RedisSettings};
use crate::keys::{Layout, Names, DEFAULT_PREFIX};
use std::path::Path;

/// What a client takes from the `delayer.conf` at `path`, with the
/// `DELAYER_*` environment variables over it ([`env`](mod@env)): how to reach Redis
/// and the key names (prefix and layout), from a file that passes
/// [`reject_unknown`]. Delayer 1.x keys it ignores, and misspelt variables,
/// are let through silently (the SDK has no logger; the server reports
/// them).
pub fn for_client(path: impl AsRef<Path>) -> Result<(RedisSettings, Names), ConfError> {
    client_settings(ConfFile::load(path)?, std::env::vars_os())
}

/// [`for_client`] on a parsed file and the variables `vars` (the process's
/// environment there; given here so the shared cases can be run).
pub fn client_settings(
    mut file: ConfFile,
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Result<(RedisSettings, Names), ConfError> {
    reject_unknown(&file)?;
    env::overlay(&mut file, vars)?;
    let names = Names::new(&key_prefix(&file), layout(&file)?);
    let redis = RedisSettings::from_conf(&file)?;
    check_mode_and_layout(&file, &redis, names.layout())?;
    Ok((redis, names))
}

/// Refuses `mode = cluster` with the classic layout (its jobs share one key,
/// which one node holds).
pub fn check_mode_and_layout(file: &ConfFile, redis: &RedisSettings, layout: Layout) -> Result<(), ConfError> {
    if redis.cluster.is_some() && layout != Layout::Topic {
        return Err(file.error(Some("redis"), Some("mode"), crate::cluster::NEEDS_TOPIC_LAYOUT));
    }
    Ok(())
}

/// `[delayer] layout`: `classic` (the default) or `topic`. In the per-topic
/// layout neither the prefix nor (checked per call) a topic may hold `{` or
/// `}`: they would move the hash tag every key name relies on.
pub fn layout(conf: &ConfFile) -> Result<Layout, ConfError> {
    match conf.get("delayer", "layout").unwrap_or("") {
        "" | "classic" => Ok(Layout::Classic),
        "topic" => {
            let prefix = key_prefix(conf);
            if prefix.contains(['{', '}']) {
                let msg = format!("key_prefix {prefix:?} contains a brace, which the per-topic layout cannot use");
                return Err(conf.error(Some("delayer"), Some("key_prefix"), msg));
            }
            Ok(Layout::Topic)
        }
        other => Err(conf.error(Some("delayer"), Some("layout"), format!("{other:?} is not one of classic, topic"))),
    }
}

/// `[delayer] key_prefix`, or the default `delayer:`.
pub fn key_prefix(conf: &ConfFile) -> String {
    conf.get("delayer", "key_prefix").map(str::to_string).unwrap_or_else(|| DEFAULT_PREFIX.to_string())
}
