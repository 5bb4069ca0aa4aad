//! Desktop notifications over a real, private D-Bus session bus.
//!
//! The test starts its own `dbus-daemon` and serves `org.freedesktop.Notifications` on it
//! with zbus, recording every call; the desktop sink reaches it over its own zbus
//! session connection, which finds the bus in `DBUS_SESSION_BUS_ADDRESS`. That variable
//! is read when the sink connects and cannot be changed safely inside a multi-threaded
//! test binary, so `notifications_over_a_private_bus` re-runs this binary for the
//! `#[ignore]`d `private_bus_scenario` with the variable set to a fresh socket path.
//!
//! The scenario first runs the sink with no bus at that path (one warning, then a no-op
//! until a retry), then starts the daemon and the server and checks what they receive.

use crate::common::bus;

use baton::model::{Event, EventKind, ProviderKind};
use baton::sink::Sink;
use baton::sink::desktop::{DesktopConfig, DesktopSink};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const DIR_VAR: &str = "BATON_TEST_PRIVATE_BUS_DIR";
const PATIENCE: Duration = Duration::from_secs(30);

#[test]
fn notifications_over_a_private_bus() {
    if Command::new("dbus-daemon")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("notice: dbus-daemon not found (install `dbus`); skipping the D-Bus test");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("bus");
    let exe = std::env::current_exe().expect("test binary");
    let out = Command::new(exe)
        .args([
            "desktop::private_bus_scenario",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", socket.display()),
        )
        .env(DIR_VAR, dir.path())
        // People read times in their own zone.
        .env("TZ", "Europe/Madrid")
        .output()
        .expect("run the scenario");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}\n{stderr}");
    assert!(out.status.success(), "scenario failed");
    assert!(
        stdout.contains("1 passed"),
        "the scenario did not run: {stdout}"
    );
}

/// One recorded `Notify` call.
#[derive(Debug, Clone)]
struct Call {
    app_name: String,
    replaces_id: u32,
    summary: String,
    body: String,
    urgency: Option<u8>,
    id: u32,
}

struct Notifications {
    calls: Arc<Mutex<Vec<Call>>>,
    /// Ids passed to `CloseNotification`.
    closed: Arc<Mutex<Vec<u32>>>,
    next_id: u32,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Notifications {
    #[allow(clippy::too_many_arguments)]
    fn notify(
        &mut self,
        app_name: String,
        replaces_id: u32,
        _app_icon: String,
        summary: String,
        body: String,
        _actions: Vec<String>,
        hints: HashMap<String, zbus::OwnedVariant>,
        _expire_timeout: i32,
    ) -> u32 {
        let id = if replaces_id != 0 {
            replaces_id
        } else {
            self.next_id += 1;
            self.next_id
        };
        let urgency = hints
            .get("urgency")
            .and_then(|v| v.downcast_ref::<u8>().ok());
        self.calls.lock().expect("lock").push(Call {
            app_name,
            replaces_id,
            summary,
            body,
            urgency,
            id,
        });
        id
    }

    fn get_capabilities(&self) -> Vec<String> {
        vec!["body".to_owned(), "body-markup".to_owned()]
    }

    #[zbus(out_args("name", "vendor", "version", "spec_version"))]
    fn get_server_information(&self) -> (String, String, String, String) {
        (
            "baton-test".to_owned(),
            "baton".to_owned(),
            "1".to_owned(),
            "1.2".to_owned(),
        )
    }

    fn close_notification(&self, id: u32) {
        self.closed.lock().expect("lock").push(id);
    }
}

/// Captured log output, to count warnings.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).into_owned()
    }
}

fn event(kind: EventKind, provider: ProviderKind, session: &str, path: &str) -> Event {
    // As the reducer stamps Claude sessions from their `cwd` (/home/me/src/myproject,
    // /home/me/web); Codex here says none.
    let project = ["myproject", "web"]
        .into_iter()
        .find(|p| path.contains(&format!("-{p}/")))
        .map(str::to_owned);
    Event {
        v: 1,
        event: kind,
        provider: Some(provider),
        session: Some(session.to_owned()),
        agent: None,
        turn: Some("t1".to_owned()),
        path: Some(path.to_owned()),
        line: Some(7),
        ts: "2026-01-01T00:00:00.000Z".to_owned(),
        record_ts: None,
        reason: None,
        message: Some("Done.".to_owned()),
        evidence: None,
        id: format!("{session}-{}", kind.as_str()),
        resets_at: None,
        initiator: None,
        origin: None,
        pre_tokens: None,
        supersedes: None,
        background_tasks: None,
        background_finished: None,
        project,
        remote: None,
        branch: None,
        job: None,
        replay: false,
    }
}

const MYPROJECT: &str = "/home/me/.claude/projects/-home-me-src-myproject/s1.jsonl";
const WEB: &str = "/home/me/.claude/projects/-home-me-web/s3.jsonl";
const CODEX: &str = "/home/me/.codex/sessions/2026/01/01/rollout-2026-01-01T10-00-00-x.jsonl";
const CODEX_SESSION: &str = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[ignore = "run by notifications_over_a_private_bus, in a process of its own"]
fn private_bus_scenario() {
    let Some(dir) = std::env::var_os(DIR_VAR).map(PathBuf::from) else {
        eprintln!("notice: run through notifications_over_a_private_bus; nothing to do");
        return;
    };
    let log = Log::default();
    let writer = log.clone();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("baton=debug"))
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .init();
    let socket = dir.join("bus");

    // --- No bus yet: failures are logged once, then events are dropped until a retry.
    let t0 = Instant::now();
    let mut early = DesktopSink::new(DesktopConfig {
        cooldown: Duration::ZERO,
        retry_after: Duration::from_secs(60),
        ..DesktopConfig::default()
    })
    .expect("sink");
    let s1 = "11111111-aaaa-4000-8000-00000000beef";
    let done = |s| event(EventKind::TurnCompleted, ProviderKind::Claude, s, MYPROJECT);
    early.deliver_at(&done(s1), t0);
    wait_until("the first failure", || early.stats().failed == 1);
    // The first event after a failure tries again at once, and fails again.
    early.deliver_at(&done(s1), t0 + Duration::from_secs(1));
    wait_until("the second failure", || early.stats().failed == 2);
    early.deliver_at(&done(s1), t0 + Duration::from_secs(2));
    assert_eq!(early.stats().skipped_no_bus, 1, "{:?}", early.stats());
    let warnings = log.text().matches("No desktop notifications").count();
    assert_eq!(warnings, 1, "log:\n{}", log.text());

    // --- The bus and the notification server come up.
    // Listens at `dir/bus`, the `socket` the sink was given.
    let (_bus, _) = bus::start_daemon(&dir).expect("start dbus-daemon");
    let calls = Arc::new(Mutex::new(Vec::<Call>::new()));
    let closed = Arc::new(Mutex::new(Vec::<u32>::new()));
    let server = Notifications {
        calls: Arc::clone(&calls),
        closed: Arc::clone(&closed),
        next_id: 0,
    };
    let _conn = zbus::block_on(
        zbus::connection::Builder::address(format!("unix:path={}", socket.display()).as_str())
            .name("org.freedesktop.Notifications")
            .serve_at("/org/freedesktop/Notifications", server)
            .build(),
    )
    .expect("serve org.freedesktop.Notifications");
    let recorded = || calls.lock().expect("lock").clone();

    // Still inside the retry interval: a no-op, nothing reaches the server.
    early.deliver_at(&done(s1), t0 + Duration::from_secs(3));
    assert_eq!(early.stats().skipped_no_bus, 2);
    // Past it, one event probes, succeeds, and notifications flow again.
    early.deliver_at(&done(s1), t0 + Duration::from_secs(62));
    wait_until("the recovery", || early.stats().shown == 1);
    early.deliver_at(&done(s1), t0 + Duration::from_secs(63));
    let (stats, finished) = early.close(PATIENCE);
    assert!(finished);
    assert_eq!((stats.shown, stats.failed), (2, 2), "{stats:?}");
    assert!(log.text().contains("Desktop notifications work again"));
    let got = recorded();
    assert_eq!(got.len(), 2, "{got:#?}");
    assert_eq!(got[0].replaces_id, 0);
    assert_eq!(
        got[1].replaces_id, got[0].id,
        "a session's second notification replaces its first"
    );

    // --- What notifies, and what it says.
    calls.lock().expect("lock").clear();
    let mut sink = DesktopSink::new(DesktopConfig {
        cooldown: Duration::from_secs(3600),
        ..DesktopConfig::default()
    })
    .expect("sink");
    let hostile = "Fixed <b>it</b>. See <a href=\"https://evil.example/x\">this</a> & \
                   \u{1b}[31mred\u{1b}[0m 'quoted'";
    let s2 = "22222222-aaaa-4000-8000-00000000beef";
    let mut completed = event(
        EventKind::TurnCompleted,
        ProviderKind::Claude,
        s2,
        MYPROJECT,
    );
    completed.message = Some(hostile.to_owned());
    sink.deliver(&completed);
    // Same session within the cooldown: suppressed.
    let mut failed_soon = event(EventKind::TurnFailed, ProviderKind::Claude, s2, MYPROJECT);
    failed_soon.reason = Some("overloaded_error".to_owned());
    sink.deliver(&failed_soon);
    let mut limit = event(
        EventKind::TurnFailed,
        ProviderKind::Codex,
        CODEX_SESSION,
        CODEX,
    );
    limit.reason = Some("usage_limit_exceeded".to_owned());
    limit.resets_at = Some("2026-01-01T22:45:00.000Z".to_owned());
    limit.message = Some("You've hit your usage limit.".to_owned());
    sink.deliver(&limit);
    let s3 = "33333333-aaaa-4000-8000-00000000beef";
    let mut question = event(EventKind::NeedsInput, ProviderKind::Claude, s3, WEB);
    question.message = Some("Deploy to staging or production?".to_owned());
    sink.deliver(&question);
    // Silent: a subagent, an anomaly, a completion the person already answered.
    let mut sub = event(EventKind::TurnCompleted, ProviderKind::Claude, "s4", WEB);
    sub.agent = Some("a881341".to_owned());
    sink.deliver(&sub);
    let mut sub_failed = event(EventKind::TurnFailed, ProviderKind::Claude, "s4", WEB);
    sub_failed.agent = Some("a881341".to_owned());
    sink.deliver(&sub_failed);
    sink.deliver(&event(EventKind::Anomaly, ProviderKind::Claude, "s5", WEB));
    let mut answered = event(EventKind::TurnCompleted, ProviderKind::Claude, "s6", WEB);
    answered.evidence = Some("next_prompt".to_owned());
    sink.deliver(&answered);
    let (stats, finished) = sink.close(PATIENCE);
    assert!(finished);
    assert_eq!((stats.shown, stats.suppressed), (3, 1), "{stats:?}");

    let got = recorded();
    for c in &got {
        println!(
            "notification on the test bus: app={:?} id={} replaces={} urgency={:?}\n  summary: {}\n  body:    {}",
            c.app_name, c.id, c.replaces_id, c.urgency, c.summary, c.body
        );
    }
    assert_eq!(got.len(), 3, "{got:#?}");
    assert_eq!(got[0].app_name, "baton");
    assert_eq!(got[0].summary, "Claude Code · myproject: your turn");
    assert_eq!(
        got[0].body,
        "Fixed &lt;b&gt;it&lt;/b&gt;. See &lt;a href=&quot;https://evil.example/x&quot;&gt;\
         this&lt;/a&gt; &amp; red &#39;quoted&#39;"
    );
    assert_eq!(got[0].urgency, Some(1), "normal urgency");
    assert_eq!(
        got[1].summary,
        "Codex · 2e3f4a5b: usage limit until 23:45 CET"
    );
    assert_eq!(got[1].body, "You&#39;ve hit your usage limit.");
    assert_eq!(got[1].urgency, Some(2), "critical urgency for failures");
    assert_eq!(got[2].summary, "Claude Code · web: needs your answer");
    assert_eq!(got[2].body, "Deploy to staging or production?");
    // A question is critical by default (issue 21): it stays until seen.
    assert_eq!(got[2].urgency, Some(2));
    assert!(got.iter().all(|c| c.replaces_id == 0));

    // --- The cooldown is per session and the next notification after it replaces.
    calls.lock().expect("lock").clear();
    let mut sink = DesktopSink::new(DesktopConfig::default()).expect("sink");
    let t = Instant::now();
    let s7 = "77777777-aaaa-4000-8000-00000000beef";
    sink.deliver_at(&done(s7), t);
    sink.deliver_at(&done(s7), t + Duration::from_secs(5));
    sink.deliver_at(&done(s7), t + Duration::from_secs(11));
    let (stats, _) = sink.close(PATIENCE);
    assert_eq!((stats.shown, stats.suppressed), (2, 1), "{stats:?}");
    let got = recorded();
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].replaces_id, got[0].id);

    // --- A turn_resumed closes the notification of the completion it takes back, and
    // only while that notification is still the session's; a Codex question notifies.
    calls.lock().expect("lock").clear();
    let mut sink = DesktopSink::new(DesktopConfig {
        cooldown: Duration::ZERO,
        ..DesktopConfig::default()
    })
    .expect("sink");
    let s8 = "88888888-aaaa-4000-8000-00000000beef";
    let mut quiet = done(s8);
    quiet.evidence = Some("quiet".to_owned());
    sink.deliver(&quiet);
    let mut resumed = event(EventKind::TurnResumed, ProviderKind::Claude, s8, MYPROJECT);
    resumed.supersedes = Some(quiet.id.clone());
    wait_until("the quiet completion's notification", || {
        recorded().len() == 1
    });
    sink.deliver(&resumed);
    // A stale retraction (names an event that is not on screen) closes nothing.
    let s9 = "99999999-aaaa-4000-8000-00000000beef";
    sink.deliver(&done(s9));
    let mut stale = event(EventKind::TurnResumed, ProviderKind::Claude, s9, MYPROJECT);
    stale.supersedes = Some("not-shown".to_owned());
    sink.deliver(&stale);
    let mut ask = event(
        EventKind::NeedsInput,
        ProviderKind::Codex,
        CODEX_SESSION,
        CODEX,
    );
    ask.reason = Some("request_user_input".to_owned());
    ask.message = Some("Which end state should this plan deliver?".to_owned());
    sink.deliver(&ask);
    let (stats, _) = sink.close(PATIENCE);
    assert_eq!(stats.shown, 3, "{stats:?}");
    let got = recorded();
    assert_eq!(got.len(), 3, "{got:#?}");
    assert_eq!(*closed.lock().expect("lock"), vec![got[0].id]);
    assert_eq!(got[2].summary, "Codex · 2e3f4a5b: needs your answer");
    assert_eq!(got[2].body, "Which end state should this plan deliver?");
}
