//! The `[redis]` section as connection settings: URL or host/port/database,
//! ACL user and password, TLS files, sentinel mode; and the redis-rs clients
//! they make. Apart from the file's syntax and rules, because it is the only
//! part that knows about connecting.

use super::file::{ConfError, ConfFile};
use crate::cluster::ClusterSettings;
use crate::sentinel::{self, SentinelSettings};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo};
use std::fmt;
use std::time::Duration;

/// How long connecting (TCP, AUTH, SELECT) may take, unless told otherwise.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How to reach Redis: the `[redis]` section's connection keys.
///
/// Either `url` (`redis://`, `rediss://` for TLS, `unix:///path`) or
/// `host` / `port` / `database`; `username` and `password`, when set,
/// override the URL's. TLS trusts the system's roots, or `tls_ca_file`
/// alone when set; `tls_cert_file` and `tls_key_file` add a client
/// certificate (mutual TLS).
#[derive(Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// `redis://`, `rediss://` or `unix://` URL, instead of host/port/database.
    pub url: Option<String>,
    /// Host name or address.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Database number.
    pub database: i64,
    /// ACL user name (overrides the URL's).
    pub username: Option<String>,
    /// Password (overrides the URL's); never logged.
    pub password: Option<String>,
    /// PEM: the certificate authority to trust instead of the system's.
    pub tls_ca: Option<Vec<u8>>,
    /// PEM: a client certificate and its key.
    pub tls_client: Option<(Vec<u8>, Vec<u8>)>,
    /// `mode = sentinel`: the master is the one these sentinels name, and
    /// url/host/port are unused.
    pub sentinel: Option<SentinelSettings>,
    /// `mode = cluster`: a Redis Cluster reached through these seed nodes.
    pub cluster: Option<ClusterSettings>,
}

impl Default for RedisSettings {
    fn default() -> Self {
        RedisSettings {
            url: None,
            host: "127.0.0.1".into(),
            port: 6379,
            database: 0,
            username: None,
            password: None,
            tls_ca: None,
            tls_client: None,
            sentinel: None,
            cluster: None,
        }
    }
}

/// Never prints the password, the URL (it may hold one) or key material.
impl fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSettings")
            .field("target", &self.describe())
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls_ca", &self.tls_ca.as_ref().map(|_| "<pem>"))
            .field("tls_client", &self.tls_client.as_ref().map(|_| "<pem>"))
            .field("sentinel", &self.sentinel)
            .field("cluster", &self.cluster)
            .finish()
    }
}

impl RedisSettings {
    /// Reads the `[redis]` connection keys.
    pub fn from_conf(conf: &ConfFile) -> Result<RedisSettings, ConfError> {
        let d = RedisSettings::default();
        let sentinel = crate::sentinel::from_conf(conf)?;
        let cluster = crate::cluster::from_conf(conf)?;
        let url = conf.string("redis", "url");
        if let Some(url) = &url {
            if let Some(key) = ["host", "port", "database"].into_iter().find(|k| conf.string("redis", k).is_some()) {
                return Err(conf.error(Some("redis"), Some(key), "set either url or host/port/database, not both"));
            }
            redis::parse_redis_url(url)
                .filter(|u| ["redis", "rediss", "unix", "redis+unix"].contains(&u.scheme()))
                .ok_or_else(|| conf.error(Some("redis"), Some("url"), "not a redis://, rediss:// or unix:// URL"))?;
        }
        let database: i64 = conf.parse_value("redis", "database", "a database number")?.unwrap_or(d.database);
        if database < 0 {
            return Err(conf.error(Some("redis"), Some("database"), "a database number is 0 or more"));
        }
        let pem = |key: &str| -> Result<Option<Vec<u8>>, ConfError> {
            match conf.path_value("redis", key) {
                None => Ok(None),
                Some(full) => {
                    let path = conf.string("redis", key).unwrap_or_default();
                    let bytes = std::fs::read(full)
                        .map_err(|e| conf.error(Some("redis"), Some(key), format!("cannot read {path}: {e}")))?;
                    // Checked here, where the file's name is known: rustls
                    // would take a file without certificates as "trust
                    // nothing" and fail later at every connection.
                    check_pem(key, &bytes)
                        .map_err(|what| conf.error(Some("redis"), Some(key), format!("{path}: {what}")))?;
                    Ok(Some(bytes))
                }
            }
        };
        let tls_client = match (pem("tls_cert_file")?, pem("tls_key_file")?) {
            (Some(cert), Some(key)) => Some((cert, key)),
            (None, None) => None,
            (Some(_), None) => return Err(conf.error(Some("redis"), Some("tls_cert_file"), "needs tls_key_file too")),
            (None, Some(_)) => return Err(conf.error(Some("redis"), Some("tls_key_file"), "needs tls_cert_file too")),
        };
        Ok(RedisSettings {
            url,
            host: conf.string("redis", "host").unwrap_or(d.host),
            port: conf.parse_value("redis", "port", "a port number (1-65535)")?.unwrap_or(d.port),
            database,
            username: conf.string("redis", "username"),
            password: conf.string("redis", "password"),
            tls_ca: pem("tls_ca_file")?,
            tls_client,
            sentinel,
            cluster,
        })
    }

    /// Where it connects, for logs: never credentials.
    pub fn describe(&self) -> String {
        if let Some(c) = &self.cluster {
            return c.describe();
        }
        if let Some(s) = &self.sentinel {
            let nodes: Vec<String> = s.nodes.iter().map(|(h, p)| format!("{h}:{p}")).collect();
            return format!("master {:?} of sentinels {}/{}", s.master_name, nodes.join(","), self.database);
        }
        match self.connection_info() {
            Ok(info) => format!("{}/{}", info.addr(), info.redis_settings().db()),
            Err(_) => format!("{}:{}/{}", self.host, self.port, self.database),
        }
    }

    /// The settings as redis-rs connection info (certificates aside).
    pub fn connection_info(&self) -> redis::RedisResult<ConnectionInfo> {
        let info = match &self.url {
            Some(url) => url.as_str().into_connection_info()?,
            None => ConnectionAddr::Tcp(self.host.clone(), self.port)
                .into_connection_info()?
                .set_redis_settings(RedisConnectionInfo::default().set_db(self.database)),
        };
        let mut redis = info.redis_settings().clone();
        if let Some(u) = &self.username {
            redis = redis.set_username(u);
        }
        if let Some(p) = &self.password {
            redis = redis.set_password(p);
        }
        Ok(info.set_redis_settings(redis))
    }

    /// A client for the node at `host:port` with this file's credentials
    /// and TLS settings (database 0).
    pub fn node_client(&self, host: &str, port: u16, tls: bool) -> redis::RedisResult<redis::Client> {
        let mut redis = RedisConnectionInfo::default();
        if let Some(u) = &self.username {
            redis = redis.set_username(u);
        }
        if let Some(p) = &self.password {
            redis = redis.set_password(p);
        }
        self.client_for(sentinel::address(host, port, tls).into_connection_info()?.set_redis_settings(redis))
    }

    /// The redis-rs cluster client for cluster mode's seeds.
    pub fn cluster_client(&self, c: &ClusterSettings) -> redis::RedisResult<redis::cluster::ClusterClient> {
        let seeds = c
            .nodes
            .iter()
            .map(|(h, p)| sentinel::address(h, *p, c.tls).into_connection_info())
            .collect::<redis::RedisResult<Vec<_>>>()?;
        let mut builder =
            redis::cluster::ClusterClientBuilder::new(seeds).connection_timeout(DEFAULT_CONNECT_TIMEOUT).retries(4);
        if let Some(u) = &self.username {
            builder = builder.username(u);
        }
        if let Some(p) = &self.password {
            builder = builder.password(p);
        }
        if let Some(certs) = self.certificates() {
            builder = builder.certs(certs);
        }
        use_default_crypto();
        builder.build()
    }

    /// A client for the master at `host:port` (sentinel mode): this file's
    /// database, credentials and TLS settings.
    pub fn master_client(&self, host: &str, port: u16) -> redis::RedisResult<redis::Client> {
        let tls = self.sentinel.as_ref().is_some_and(|s| s.tls);
        let mut redis = RedisConnectionInfo::default().set_db(self.database);
        if let Some(u) = &self.username {
            redis = redis.set_username(u);
        }
        if let Some(p) = &self.password {
            redis = redis.set_password(p);
        }
        self.client_for(sentinel::address(host, port, tls).into_connection_info()?.set_redis_settings(redis))
    }

    /// A client for `info` with this file's TLS certificates.
    pub(crate) fn client_for(&self, info: ConnectionInfo) -> redis::RedisResult<redis::Client> {
        use_default_crypto();
        match self.certificates() {
            None => redis::Client::open(info),
            Some(certs) => redis::Client::build_with_tls(info, certs),
        }
    }

    /// The `tls_*` files as redis-rs takes them, for one node or a cluster
    /// (`None`: the system's roots, no client certificate).
    fn certificates(&self) -> Option<redis::TlsCertificates> {
        if self.tls_ca.is_none() && self.tls_client.is_none() {
            return None;
        }
        Some(redis::TlsCertificates {
            client_tls: self
                .tls_client
                .clone()
                .map(|(client_cert, client_key)| redis::ClientTlsConfig { client_cert, client_key }),
            root_cert: self.tls_ca.clone(),
        })
    }
}

/// Makes ring the process's rustls crypto provider unless one is set.
/// redis-rs's TLS (rustls) asks for the process default at each TLS
/// connection, and rustls cannot choose one when a program's dependencies
/// enable two providers (ring and aws-lc-rs): the connection would panic.
/// An application that installed its own provider keeps it.
pub(crate) fn use_default_crypto() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Err: another thread installed one first, which is as good.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// What is wrong with the PEM file of `key` (`tls_ca_file` and
/// `tls_cert_file` hold certificates, `tls_key_file` a private key).
fn check_pem(key: &str, bytes: &[u8]) -> Result<(), String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    if key == "tls_key_file" {
        return PrivateKeyDer::from_pem_slice(bytes).map(drop).map_err(|e| format!("no PEM private key in it ({e})"));
    }
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM certificates ({e})"))?;
    match certs.is_empty() {
        true => Err("no PEM certificate in it".into()),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_number_names_file_section_key_and_line() {
        let conf = ConfFile::parse("d.conf".into(), "[redis]\n\nport = sixty\n").expect("parses");
        let err = RedisSettings::from_conf(&conf).expect_err("bad port");
        assert_eq!(err.line, Some(3));
        assert_eq!(err.to_string(), "d.conf:3: [redis] port: \"sixty\" is not a port number (1-65535)");
    }

    #[test]
    fn debug_hides_password() {
        let s = RedisSettings { password: Some("hunter2".into()), ..Default::default() };
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
