//! A private D-Bus session bus with a stand-in notification server: one that records
//! every `Notify` call, or one that takes the call and never answers. Shared by the
//! end-to-end tests that need a desktop (`#[path]`-included, next to `mod common`).
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One recorded `Notify` call.
#[derive(Debug, Clone)]
pub struct Call {
    pub summary: String,
    pub body: String,
}

struct Server {
    calls: Arc<Mutex<Vec<Call>>>,
    /// Calls taken (answered or not).
    taken: Arc<AtomicUsize>,
    /// Never answer `Notify`.
    silent: bool,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Server {
    #[allow(clippy::too_many_arguments)]
    async fn notify(
        &self,
        _app_name: String,
        _replaces_id: u32,
        _app_icon: String,
        summary: String,
        body: String,
        _actions: Vec<String>,
        _hints: HashMap<String, zbus::OwnedVariant>,
        _expire_timeout: i32,
    ) -> u32 {
        self.taken.fetch_add(1, Ordering::SeqCst);
        if self.silent {
            std::future::pending::<()>().await;
        }
        let mut calls = self.calls.lock().unwrap();
        calls.push(Call { summary, body });
        u32::try_from(calls.len()).unwrap()
    }

    fn get_capabilities(&self) -> Vec<String> {
        vec!["body".to_owned(), "body-markup".to_owned()]
    }

    #[zbus(out_args("name", "vendor", "version", "spec_version"))]
    fn get_server_information(&self) -> (String, String, String, String) {
        (
            "t".to_owned(),
            "t".to_owned(),
            "1".to_owned(),
            "1.2".to_owned(),
        )
    }

    fn close_notification(&self, _id: u32) {}
}

/// A `dbus-daemon` and a notification server on it; both end on drop.
pub struct Bus {
    _daemon: DbusDaemon,
    _conn: zbus::Connection,
    /// The address for `DBUS_SESSION_BUS_ADDRESS`.
    pub addr: String,
    pub calls: Arc<Mutex<Vec<Call>>>,
    pub taken: Arc<AtomicUsize>,
}

/// A private `dbus-daemon` listening at `dir/bus`, killed on drop.
pub struct DbusDaemon(Child);

impl Drop for DbusDaemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a private session bus in `dir`, returning it and its address once it listens;
/// `None`, with a printed notice, without `dbus-daemon`.
pub fn start_daemon(dir: &Path) -> Option<(DbusDaemon, String)> {
    let socket = dir.join("bus");
    let config = dir.join("session.conf");
    std::fs::write(
        &config,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
            socket.display()
        ),
    )
    .unwrap();
    let Ok(mut daemon) = Command::new("dbus-daemon")
        .arg(format!("--config-file={}", config.display()))
        .args(["--nofork", "--print-address"])
        .stdout(Stdio::piped())
        .spawn()
    else {
        println!("NOTICE: dbus-daemon not found (install `dbus`); desktop part skipped.");
        return None;
    };
    // The address is printed once the bus listens.
    let mut line = String::new();
    std::io::BufReader::new(daemon.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("unix:"), "dbus-daemon said {line:?}");
    Some((
        DbusDaemon(daemon),
        format!("unix:path={}", socket.display()),
    ))
}

impl Bus {
    /// Starts a bus in `dir` with a server that records (`silent`: never answers)
    /// every notification; `None`, with a printed notice, without `dbus-daemon`.
    pub fn start(dir: &Path, silent: bool) -> Option<Bus> {
        let (daemon, addr) = start_daemon(dir)?;
        let calls = Arc::new(Mutex::new(Vec::new()));
        let taken = Arc::new(AtomicUsize::new(0));
        let conn = zbus::block_on(
            zbus::connection::Builder::address(addr.as_str())
                .name("org.freedesktop.Notifications")
                .serve_at(
                    "/org/freedesktop/Notifications",
                    Server {
                        calls: Arc::clone(&calls),
                        taken: Arc::clone(&taken),
                        silent,
                    },
                )
                .build(),
        )
        .unwrap();
        Some(Bus {
            _daemon: daemon,
            _conn: conn,
            addr,
            calls,
            taken,
        })
    }

    /// Notifications shown so far.
    pub fn shown(&self) -> usize {
        self.calls.lock().unwrap().len()
    }
}
