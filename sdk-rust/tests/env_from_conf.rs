//! `Delayer::from_conf` takes the process's `DELAYER_*` variables over the
//! file: the port and a password file, against a Redis that requires it.
//! The only test in this binary, as it sets the process's environment.

use delayer::Delayer;
use std::time::Duration;
use testkit::{free_port, temp_dir, RedisServer};

#[test]
fn from_conf_takes_the_port_and_password_file_from_the_environment() {
    let password = "pw-rust-env-Yt3";
    let redis = RedisServer::start_with(&["--save", "", "--requirepass", password]);
    let dir = temp_dir("env-from-conf");
    std::fs::write(dir.join("redis.password"), format!("{password}\n")).expect("write");
    let path = dir.join("delayer.conf");
    std::fs::write(&path, format!("[delayer]\nkey_prefix = env-rs:\n\n[redis]\nport = {}\n", free_port()))
        .expect("write");
    std::env::set_var("DELAYER_REDIS_PORT", redis.port().to_string());
    std::env::set_var("DELAYER_REDIS_PASSWORD_FILE", dir.join("redis.password"));
    let d = Delayer::from_conf(&path).expect("configured");
    d.push("t", "from-env", Duration::from_secs(60)).expect("push with the password from the file");
    let url = format!("redis://:{password}@127.0.0.1:{}/", redis.port());
    let mut conn = redis::Client::open(url).and_then(|c| c.get_connection()).expect("connect");
    let score: Option<f64> =
        redis::cmd("ZSCORE").arg("env-rs:job_pool").arg("from-env").query(&mut conn).expect("ZSCORE");
    assert!(score.is_some());
    std::env::set_var("DELAYER_REDIS_PASSWORD", "also");
    let Err(e) = Delayer::from_conf(&path) else { panic!("both DELAYER_REDIS_PASSWORD and its _FILE were taken") };
    let e = e.to_string();
    assert!(e.contains("DELAYER_REDIS_PASSWORD is set too") && !e.contains(password), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
