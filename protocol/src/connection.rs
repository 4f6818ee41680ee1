//! Pooled Redis connections with bounded waits.
//!
//! redis-rs's own r2d2 glue connects without a timeout and pings on every
//! checkout; this manager bounds connecting (a dead host fails fast instead of
//! hanging), optionally bounds each reply, and leaves health checks to the
//! errors the commands themselves return. The server and the SDK share it.
//!
//! A connection ([`Conn`]) is to one Redis, or to a Redis Cluster (redis-rs
//! routes each command by its key and follows MOVED and ASK); [`Batch`] is
//! a pipeline that stays correct on a cluster, where one node's pipeline
//! cannot hold commands for keys in other slots.

use crate::target::Target;
use redis::cluster::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Client, Cmd, Connection, ConnectionLike, FromRedisValue, RedisError, RedisResult, Value};
use std::time::Duration;

/// A connection to one Redis, or to a Redis Cluster (`[redis] mode = cluster`).
// One value per pooled connection, and every command matches on it: boxing the
// larger variant would add an indirection per command to save a few hundred
// bytes per connection.
#[allow(clippy::large_enum_variant)]
pub enum Conn {
    /// One node (standalone, or the sentinels' master).
    Single(Connection),
    /// A cluster: each command goes to the node of its key's slot.
    Cluster(ClusterConnection),
}

impl Conn {
    /// Bounds each read (`None`: none).
    pub fn set_read_timeout(&self, dur: Option<Duration>) -> RedisResult<()> {
        match self {
            Conn::Single(c) => c.set_read_timeout(dur),
            Conn::Cluster(c) => c.set_read_timeout(dur),
        }
    }

    /// Bounds each write (`None`: none).
    pub fn set_write_timeout(&self, dur: Option<Duration>) -> RedisResult<()> {
        match self {
            Conn::Single(c) => c.set_write_timeout(dur),
            Conn::Cluster(c) => c.set_write_timeout(dur),
        }
    }

    /// `cmd` on the master of each key's slot, read as a count: the least
    /// one. On one node, `cmd` once.
    pub fn least_on_nodes_of(&mut self, cmd: &Cmd, keys: &[String]) -> RedisResult<Value> {
        let Conn::Cluster(cluster) = self else { return cmd.query(self) };
        if keys.is_empty() {
            return cmd.query(cluster);
        }
        let mut least = i64::MAX;
        for route in routes_of(keys) {
            match cluster.route_command(cmd, RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)))? {
                Value::Int(n) => least = least.min(n),
                other => return Ok(other),
            }
        }
        Ok(Value::Int(least))
    }

    /// Whether this is a cluster connection.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// Every key matching `pattern` (SCAN to the end; on a cluster, on every
    /// master, since each holds its own slots' keys).
    pub fn scan_match_all(&mut self, pattern: &str) -> RedisResult<Vec<String>> {
        let scan = |cursor: u64| redis::cmd("SCAN").arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(500).clone();
        let mut keys = Vec::new();
        match self {
            Conn::Single(conn) => {
                let mut cursor = 0;
                loop {
                    let (next, found): (u64, Vec<String>) = scan(cursor).query(conn)?;
                    keys.extend(found);
                    if next == 0 {
                        return Ok(keys);
                    }
                    cursor = next;
                }
            }
            Conn::Cluster(conn) => {
                use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
                let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(conn)?;
                for (host, port) in masters(&nodes) {
                    let mut cursor = 0;
                    loop {
                        let to = SingleNodeRoutingInfo::ByAddress { host: host.clone(), port };
                        let reply = conn.route_command(&scan(cursor), RoutingInfo::SingleNode(to))?;
                        let (next, found): (u64, Vec<String>) = redis::from_redis_value(reply)?;
                        keys.extend(found);
                        if next == 0 {
                            break;
                        }
                        cursor = next;
                    }
                }
                Ok(keys)
            }
        }
    }
}

/// Connections from a [`Target`]: here, beside the [`Conn`] they make.
impl Target {
    /// A connection to Redis (sentinel mode: to the node the sentinels name,
    /// checked to be a master; cluster mode: to the cluster). `timeout`
    /// bounds each step of connecting.
    pub fn connect(&self, timeout: Duration) -> RedisResult<Conn> {
        if let Some(cluster) = self.cluster_client() {
            let config = redis::cluster::ClusterConfig::new().set_connection_timeout(timeout);
            return Ok(Conn::Cluster(cluster.get_connection_with_config(config)?));
        }
        Ok(Conn::Single(self.connect_node(timeout)?))
    }
}

/// The masters of `CLUSTER NODES` (not failing), as host and port.
fn masters(nodes: &str) -> Vec<(String, u16)> {
    nodes
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = fields.get(2)?;
            if !flags.split(',').any(|f| f == "master") || flags.contains("fail") {
                return None;
            }
            // ip:port@cport[,hostname]
            let addr = fields.get(1)?.split(['@', ',']).next()?;
            let (host, port) = addr.rsplit_once(':')?;
            Some((host.trim_matches(['[', ']']).to_string(), port.parse().ok()?))
        })
        .collect()
}

impl ConnectionLike for Conn {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(&mut self, cmd: &[u8], offset: usize, count: usize) -> RedisResult<Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn req_command(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Conn::Single(c) => c.req_command(cmd),
            Conn::Cluster(c) => c.req_command(cmd),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }

    fn check_connection(&mut self) -> bool {
        match self {
            Conn::Single(c) => c.check_connection(),
            Conn::Cluster(c) => c.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match self {
            Conn::Single(c) => c.is_open(),
            Conn::Cluster(c) => c.is_open(),
        }
    }
}

/// Commands sent together: one pipeline (one round trip) to one Redis; on a
/// cluster, each command on its own, routed by its key (a node's pipeline
/// cannot hold another slot's keys). Replies as a pipeline's: those of the
/// commands not ignored, in order.
#[derive(Clone, Default)]
pub struct Batch {
    cmds: Vec<(Cmd, Reply)>,
}

/// What a batch does with one command's reply.
#[derive(Clone, Copy, PartialEq)]
enum Reply {
    /// Answered; an error fails the batch.
    Wanted,
    /// Not answered; an error fails the batch.
    Ignored,
    /// Answered, an error Redis replies included (as `Value::ServerError`):
    /// only a lost connection fails the batch.
    Hint,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Adds `cmd`, its reply wanted.
    pub fn add(&mut self, cmd: Cmd) -> &mut Batch {
        self.cmds.push((cmd, Reply::Wanted));
        self
    }

    /// Adds `cmd`, its reply not wanted (errors still count).
    pub fn add_ignored(&mut self, cmd: Cmd) -> &mut Batch {
        self.cmds.push((cmd, Reply::Ignored));
        self
    }

    /// Adds `cmd`, whose error reply is its reply (`Value::ServerError`)
    /// and fails nothing: the per-topic layout's index writes, hints the
    /// server repairs (`ops::index`).
    pub fn add_hint(&mut self, cmd: Cmd) -> &mut Batch {
        self.cmds.push((cmd, Reply::Hint));
        self
    }

    /// Whether no command was added.
    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }

    fn has_hints(&self) -> bool {
        self.cmds.iter().any(|(_, r)| *r == Reply::Hint)
    }

    /// The replies: a list of the wanted ones.
    pub fn send<C: ConnectionLike>(&self, conn: &mut C, cluster: bool) -> RedisResult<Value> {
        // Redis refuses an empty pipeline ("empty command"); nothing to ask.
        if self.is_empty() {
            return Ok(Value::Array(Vec::new()));
        }
        if !cluster && self.has_hints() {
            return self.settle(self.hinted_pipeline().query(conn)?);
        }
        if !cluster {
            return self.pipeline().query(conn);
        }
        let mut replies = Vec::new();
        for (cmd, reply) in &self.cmds {
            if let Some(v) = keep(*reply, cmd.query(conn))? {
                replies.push(v);
            }
        }
        Ok(Value::Array(replies))
    }

    /// The async twin of [`Batch::send`].
    #[cfg(feature = "aio")]
    pub async fn send_async<C: redis::aio::ConnectionLike + Send>(
        &self,
        conn: &mut C,
        cluster: bool,
    ) -> RedisResult<Value> {
        if self.is_empty() {
            return Ok(Value::Array(Vec::new()));
        }
        if !cluster && self.has_hints() {
            return self.settle(self.hinted_pipeline().query_async(conn).await?);
        }
        if !cluster {
            return self.pipeline().query_async(conn).await;
        }
        let mut replies = Vec::new();
        for (cmd, reply) in &self.cmds {
            if let Some(v) = keep(*reply, cmd.query_async(conn).await)? {
                replies.push(v);
            }
        }
        Ok(Value::Array(replies))
    }

    /// One node's pipeline of these commands.
    fn pipeline(&self) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        for (cmd, reply) in &self.cmds {
            pipe.add_command(cmd.clone());
            if *reply == Reply::Ignored {
                pipe.ignore();
            }
        }
        pipe
    }

    /// A pipeline that answers every command, errors included (read with
    /// [`Batch::settle`]).
    fn hinted_pipeline(&self) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        self.cmds.iter().for_each(|(cmd, _)| {
            pipe.add_command(cmd.clone());
        });
        pipe.ignore_errors();
        pipe
    }

    /// A hinted pipeline's replies as [`Batch::send`] answers them: the
    /// first error of a command not a hint fails the batch.
    fn settle(&self, all: Value) -> RedisResult<Value> {
        let Value::Array(all) = all else { return Ok(all) };
        let mut replies = Vec::new();
        for ((_, reply), value) in self.cmds.iter().zip(all) {
            if let Some(v) = keep(*reply, Ok(value))? {
                replies.push(v);
            }
        }
        Ok(Value::Array(replies))
    }

    /// Each command's own reply or error, read as `T` (one node: a pipeline
    /// that goes on past errors).
    pub fn query_each<T: FromRedisValue>(&self, conn: &mut Conn) -> RedisResult<Vec<RedisResult<T>>> {
        let read = |v: RedisResult<Value>| v.and_then(|v| Ok(redis::from_redis_value::<T>(v)?));
        if self.is_empty() {
            return Ok(Vec::new());
        }
        if !conn.is_cluster() {
            let replies: Vec<RedisResult<Value>> = self.pipeline().ignore_errors().query(conn)?;
            return Ok(replies.into_iter().map(read).collect());
        }
        Ok(self.cmds.iter().filter(|(_, r)| *r != Reply::Ignored).map(|(cmd, _)| read(cmd.query(conn))).collect())
    }

    /// [`Batch::send`] on a [`Conn`], read as `T`.
    pub fn query<T: FromRedisValue>(&self, conn: &mut Conn) -> RedisResult<T> {
        let cluster = conn.is_cluster();
        Ok(redis::from_redis_value(self.send(conn, cluster)?)?)
    }
}

/// One command's outcome in a batch: its reply (`None`: not wanted), or the
/// error that fails the batch. A hint's error Redis replied is its reply.
fn keep(reply: Reply, got: RedisResult<Value>) -> RedisResult<Option<Value>> {
    let got = match got {
        Ok(Value::ServerError(e)) if reply != Reply::Hint => Err(e.into()),
        Err(e) if reply == Reply::Hint => match e.clone().into_server_errors().as_deref() {
            Some([(_, server)]) => Ok(Value::ServerError(server.clone())),
            _ => Err(e),
        },
        got => got,
    };
    Ok(if reply == Reply::Ignored { got.map(|_| None)? } else { Some(got?) })
}

pub use crate::conf::DEFAULT_CONNECT_TIMEOUT;

/// An r2d2 connection manager for one Redis, or for the master of a
/// Sentinel deployment (each new connection asks the sentinels).
#[derive(Debug, Clone)]
pub struct Manager {
    target: Target,
    connect_timeout: Duration,
    io_timeout: Option<Duration>,
}

impl Manager {
    /// A manager for `client`'s Redis. `io_timeout` bounds every read and
    /// write (`None` for clients that block on BRPOP).
    pub fn new(client: Client, connect_timeout: Duration, io_timeout: Option<Duration>) -> Self {
        Manager::with_target(Target::fixed(client), connect_timeout, io_timeout)
    }

    /// A manager for `target` (a fixed Redis, or the sentinels' master).
    pub fn with_target(target: Target, connect_timeout: Duration, io_timeout: Option<Duration>) -> Self {
        Manager { target, connect_timeout, io_timeout }
    }

    /// Where connections go.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// A new connection with this manager's timeouts (sentinel mode: to the
    /// master of the moment).
    pub fn connect(&self) -> Result<Conn, RedisError> {
        let conn = self.target.connect(self.connect_timeout)?;
        conn.set_read_timeout(self.io_timeout)?;
        conn.set_write_timeout(self.io_timeout)?;
        Ok(conn)
    }
}

/// A pooled connection that can be retired: one that met a demoted master
/// (`READONLY`) is still open, but must not go back into the pool.
pub struct PooledConn {
    conn: Conn,
    retired: bool,
}

impl PooledConn {
    /// Drops the connection from the pool once it is returned.
    pub fn retire(&mut self) {
        self.retired = true;
    }
}

impl std::ops::Deref for PooledConn {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.conn
    }
}

impl std::ops::DerefMut for PooledConn {
    fn deref_mut(&mut self) -> &mut Conn {
        &mut self.conn
    }
}

impl r2d2::ManageConnection for Manager {
    type Connection = PooledConn;
    type Error = RedisError;

    fn connect(&self) -> Result<PooledConn, RedisError> {
        Ok(PooledConn { conn: Manager::connect(self)?, retired: false })
    }

    fn is_valid(&self, conn: &mut PooledConn) -> Result<(), RedisError> {
        redis::cmd("PING").query::<()>(&mut conn.conn)
    }

    fn has_broken(&self, conn: &mut PooledConn) -> bool {
        conn.retired || !conn.conn.is_open()
    }
}

/// The pool's shape.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// Most connections open at once.
    pub max_size: u32,
    /// Idle connections kept open.
    pub min_idle: u32,
    /// Close connections idle this long (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// Close connections this old (`None`: never).
    pub max_lifetime: Option<Duration>,
    /// How long connecting, and waiting for a free connection, may take.
    pub connect_timeout: Duration,
    /// Bound on each reply (`None`: wait as long as Redis takes).
    pub io_timeout: Option<Duration>,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_size: 8,
            min_idle: 0,
            idle_timeout: Some(Duration::from_secs(300)),
            max_lifetime: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            io_timeout: None,
        }
    }
}

/// A connection pool: no connection is opened until one is needed, and
/// connection errors are returned to the caller rather than logged by r2d2.
pub fn build_pool(client: Client, opts: &PoolOptions) -> r2d2::Pool<Manager> {
    build_pool_for(Target::fixed(client), opts)
}

/// As [`build_pool`], for a [`Target`] (sentinel mode included).
pub fn build_pool_for(target: Target, opts: &PoolOptions) -> r2d2::Pool<Manager> {
    let manager = Manager::with_target(target, opts.connect_timeout, opts.io_timeout);
    r2d2::Pool::builder()
        .max_size(opts.max_size.max(1))
        .min_idle(Some(opts.min_idle.min(opts.max_size)))
        // r2d2 panics on zero durations; zero means "never" here.
        .idle_timeout(opts.idle_timeout.filter(|d| !d.is_zero()))
        .max_lifetime(opts.max_lifetime.filter(|d| !d.is_zero()))
        .connection_timeout(opts.connect_timeout.max(Duration::from_millis(1)))
        .test_on_check_out(false)
        .error_handler(Box::new(r2d2::NopErrorHandler))
        .build_unchecked(manager)
}

/// The master route of each key's slot, once each.
pub fn routes_of(keys: &[String]) -> Vec<Route> {
    let mut routes: Vec<Route> = Vec::new();
    for key in keys {
        let route = Route::with_key(key, SlotAddr::Master);
        if !routes.contains(&route) {
            routes.push(route);
        }
    }
    routes
}

#[cfg(test)]
mod tests {
    use super::masters;

    #[test]
    fn masters_are_read_from_cluster_nodes() {
        let nodes = "\
07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected
67ed 127.0.0.1:30002@40002,node-2 master - 0 1426238316232 2 connected 5461-10922
e7d1 127.0.0.1:30001@40001 myself,master - 0 0 1 connected 0-5460
6ec2 127.0.0.1:30003@40003 master,fail - 1426238316232 1426238316232 3 disconnected
";
        assert_eq!(masters(nodes), [("127.0.0.1".to_string(), 30002), ("127.0.0.1".to_string(), 30001)]);
    }
}
