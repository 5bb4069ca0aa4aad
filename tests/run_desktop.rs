//! `baton run` end to end on a private D-Bus: a real completion becomes a notification
//! (summary, escaped body); `--no-desktop` and `desktop.enabled = false` silence it.
//! The daemon is a child process, so it gets the bus address in its environment.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::common::bus;

use crate::common::{Claude, Daemon, append};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
struct Call {
    summary: String,
    body: String,
}

struct Notifications {
    calls: Arc<Mutex<Vec<Call>>>,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Notifications {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &mut self,
        _app_name: String,
        _replaces_id: u32,
        _app_icon: String,
        summary: String,
        body: String,
        _actions: Vec<String>,
        _hints: HashMap<String, zbus::OwnedVariant>,
        _expire_timeout: i32,
    ) -> u32 {
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

/// Runs a daemon on a private bus with a notification server, completes two sessions'
/// turns (the first with markup in its answer) and returns what the server received.
fn notifications(flags: &[&str], config: &str) -> Option<Vec<Call>> {
    let d = Daemon::tree();
    let (_bus, addr) = bus::start_daemon(d.dir.path())?;
    let calls = Arc::new(Mutex::new(Vec::new()));
    let _conn = zbus::block_on(
        zbus::connection::Builder::address(addr.as_str())
            .name("org.freedesktop.Notifications")
            .serve_at(
                "/org/freedesktop/Notifications",
                Notifications {
                    calls: Arc::clone(&calls),
                },
            )
            .build(),
    )
    .unwrap();
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(cfg, config).unwrap();
    let mut d = d.env("DBUS_SESSION_BUS_ADDRESS", &addr).start(flags);
    // These records name no `cwd`: the project name is the folder's, whole
    // (`projects/<encoded cwd>/<session>.jsonl`; the encoding is lossy).
    let project = d.claude().join("projects").join("-home-me-src-myproject");
    std::fs::create_dir_all(&project).unwrap();
    for answer in ["Fixed <b>it</b> & <a href=\"x\">more</a>", "Second"] {
        let c = Claude::new();
        let (bytes, turn) = c.turn("hi", answer);
        append(&c.path_in(&project), bytes.as_bytes());
        d.wait_for("turn_completed", common::is("turn_completed", turn));
    }
    // Stopping closes the desktop sink, which finishes its queue first.
    d.stop();
    Some(calls.lock().unwrap().clone())
}

#[test]
fn run_notifies_on_a_private_bus() {
    let Some(calls) = notifications(&[], "") else {
        return;
    };
    assert_eq!(calls.len(), 2, "{calls:?}");
    println!("notification seen on the test bus: {:?}", calls[0]);
    assert_eq!(
        calls[0].summary,
        "Claude Code · home-me-src-myproject: your turn"
    );
    assert_eq!(
        calls[0].body,
        "Fixed &lt;b&gt;it&lt;/b&gt; &amp; &lt;a href=&quot;x&quot;&gt;more&lt;/a&gt;"
    );
    assert_eq!(calls[1].body, "Second");
}

#[test]
fn no_desktop_flag_and_config_silence_it() {
    let Some(calls) = notifications(&["--no-desktop"], "") else {
        return;
    };
    assert!(calls.is_empty(), "{calls:?}");
    let calls = notifications(&[], "[desktop]\nenabled = false\n").unwrap();
    assert!(calls.is_empty(), "{calls:?}");
}
