//! What a click on a notification can do where no window system says which window is
//! which (GNOME's and KDE's Wayland, a console):
//!
//! - The notification server's `ActivationToken` (notification spec 1.2): a server that
//!   sends it just before `ActionInvoked` has its token passed on to the programs a click
//!   runs, as `XDG_ACTIVATION_TOKEN` and `DESKTOP_STARTUP_ID`; a token that is not one
//!   (escapes, spaces, too long) is dropped, said in the log, and the click goes on.
//! - `status` says that clicks cannot raise the terminal there, unless `on_click` is set.
//!
//! A stand-in server with actions on a private session bus sends both signals to baton's
//! connection only, as dunst, GNOME Shell and KDE do.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::common::bus;

use crate::common::{Claude, DEADLINE, Daemon, append};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const PATH: &str = "/org/freedesktop/Notifications";
const IFACE: &str = "org.freedesktop.Notifications";

/// A server with actions that records each `Notify`: (its id, the caller's bus name).
struct Server {
    calls: Arc<Mutex<Vec<(u32, String)>>>,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Server {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &mut self,
        #[zbus(header)] header: zbus::message::Header<'_>,
        _app_name: String,
        _replaces_id: u32,
        _app_icon: String,
        _summary: String,
        _body: String,
        _actions: Vec<String>,
        _hints: HashMap<String, zbus::OwnedVariant>,
        _expire_timeout: i32,
    ) -> u32 {
        let sender = header.sender().map(|s| s.to_string()).unwrap_or_default();
        let mut calls = self.calls.lock().unwrap();
        let id = u32::try_from(calls.len()).unwrap() + 1;
        calls.push((id, sender));
        id
    }

    fn get_capabilities(&self) -> Vec<String> {
        vec!["actions".to_owned(), "body".to_owned()]
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

/// A click as a 1.2 server sends it: the token, then the action, to `to` only.
fn click(conn: &zbus::Connection, to: &str, id: u32, token: &str) {
    zbus::block_on(conn.emit_signal(Some(to), PATH, IFACE, "ActivationToken", &(id, token)))
        .unwrap();
    zbus::block_on(conn.emit_signal(Some(to), PATH, IFACE, "ActionInvoked", &(id, "default")))
        .unwrap();
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A private bus with the stand-in server on it.
struct Stand {
    _bus: bus::DbusDaemon,
    addr: String,
    conn: zbus::Connection,
    calls: Arc<Mutex<Vec<(u32, String)>>>,
}

impl Stand {
    /// `None`, with a printed notice, without `dbus-daemon`.
    fn start(dir: &Path) -> Option<Stand> {
        let (bus, addr) = bus::start_daemon(dir)?;
        let calls = Arc::new(Mutex::new(Vec::new()));
        let conn = zbus::block_on(
            zbus::connection::Builder::address(addr.as_str())
                .name(IFACE)
                .serve_at(
                    PATH,
                    Server {
                        calls: Arc::clone(&calls),
                    },
                )
                .build(),
        )
        .unwrap();
        Some(Stand {
            _bus: bus,
            addr,
            conn,
            calls,
        })
    }

    /// Waits for the `n`th notification: (its id, baton's bus name).
    fn nth(&self, n: usize) -> (u32, String) {
        let start = Instant::now();
        loop {
            if let Some(call) = self.calls.lock().unwrap().get(n - 1).cloned() {
                return call;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "notification {n} was never shown"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A completed turn of a new Claude session in `d`'s tree, once the daemon emitted it.
fn complete(d: &mut Daemon) -> Claude {
    let c = Claude::new();
    let path = c.path_in(&d.claude().join("-home-me-src-web"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let (bytes, turn) = c.turn("go", "done");
    append(&path, bytes.as_bytes());
    d.wait_for("the completion", common::is("turn_completed", turn));
    c
}

fn config(d: &Daemon, text: &str) {
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, text).unwrap();
}

#[test]
fn a_clicks_activation_token_reaches_on_click_and_a_bad_one_is_dropped() {
    let d = Daemon::tree();
    let Some(stand) = Stand::start(d.dir.path()) else {
        return;
    };
    let conn = &stand.conn;
    // on_click: a script of the test's that appends the two variables it was given.
    let script = d.dir.path().join("on-click");
    let out = d.dir.path().join("clicked");
    std::fs::write(
        &script,
        "#!/bin/sh\necho \"${XDG_ACTIVATION_TOKEN:-none}|${DESKTOP_STARTUP_ID:-none}|$BATON_SESSION\" >> \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    config(
        &d,
        &format!(
            "[desktop]\ncooldown = \"0s\"\non_click = [{:?}, {:?}]\n",
            script.display().to_string(),
            out.display().to_string()
        ),
    );
    let mut d = d.env("DBUS_SESSION_BUS_ADDRESS", &stand.addr).start(&[]);
    let c = complete(&mut d);
    let (id, sender) = stand.nth(1);

    // --- A token: on_click has it in both variables. (Clicked again until the
    // listener, started with the connection, hears it.)
    let token = "gnome-shell/baton-test/42_TIME1234";
    let want = format!("{token}|{token}|{}", c.session);
    let start = Instant::now();
    while !lines(&out).contains(&want) {
        assert!(
            start.elapsed() < DEADLINE,
            "on_click never got the token; it wrote {:?}",
            lines(&out)
        );
        click(conn, &sender, id, token);
        std::thread::sleep(Duration::from_millis(500));
    }

    // --- A token that is not one (an escape and a space): dropped, and said so.
    let before = lines(&out).len();
    click(conn, &sender, id, "bad \u{1b}[31mtoken");
    let start = Instant::now();
    while lines(&out).len() == before {
        assert!(start.elapsed() < DEADLINE, "the second click ran nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        lines(&out)[before],
        format!("none|none|{}", c.session),
        "the click went on without the bad token"
    );
    d.wait_log("the dropped token", |l| {
        l.contains("activation token is not one")
    });
    // --- Too long: dropped too.
    let before = lines(&out).len();
    click(
        conn,
        &sender,
        id,
        &"x".repeat(baton::sink::notifier::TOKEN_MAX + 1),
    );
    let start = Instant::now();
    while lines(&out).len() == before {
        assert!(start.elapsed() < DEADLINE, "the third click ran nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(lines(&out)[before].starts_with("none|none|"));
    d.stop();
}

/// `baton status ARGS`' stdout.
fn status(d: &Daemon, args: &[&str]) -> String {
    let out = d.baton().arg("status").args(args).output().unwrap();
    common::assert_ok(&out);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn status_says_when_a_click_cannot_raise_the_terminal() {
    const SAID: &str = "Clicks on notifications switch the tmux pane but cannot raise the terminal: no X11 display and no sway or Hyprland socket";
    for on_click in [false, true] {
        let d = Daemon::tree();
        let Some(stand) = Stand::start(d.dir.path()) else {
            return;
        };
        let extra = if on_click {
            "on_click = [\"true\"]\n"
        } else {
            ""
        };
        config(&d, &format!("[desktop]\ncooldown = \"0s\"\n{extra}"));
        // No window system that says: no X11 display, no sway, no Hyprland.
        let mut d = d
            .env("DBUS_SESSION_BUS_ADDRESS", &stand.addr)
            .env("DISPLAY", "")
            .env("SWAYSOCK", "")
            .env("HYPRLAND_INSTANCE_SIGNATURE", "")
            .start(&[]);
        complete(&mut d);
        stand.nth(1);
        // The desktop thread looks after each notification it shows, in order: once the
        // second is shown, the first one's look is in.
        complete(&mut d);
        stand.nth(2);
        let table = status(&d, &[]);
        let json = status(&d, &["--json"]);
        let facts: Vec<serde_json::Value> = json
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v.get("session").is_none())
            .collect();
        if on_click {
            assert!(!table.contains("cannot raise"), "{table}");
            assert!(facts.is_empty(), "{json}");
        } else {
            assert!(table.contains(SAID), "{table}");
            assert_eq!(facts.len(), 1, "{json}");
            assert!(
                facts[0]["no_raise"]
                    .as_str()
                    .unwrap()
                    .starts_with("no X11 display"),
                "{json}"
            );
        }
        d.stop();
    }
}
