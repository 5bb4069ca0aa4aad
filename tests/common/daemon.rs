//! Harness for tests that run the real `baton run` on a temporary tree.

use serde_json::{Value, json};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long any wait may take before the test fails. Generous: CI machines stall.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A temporary tree with a Claude root and a Codex root, and the daemon running on it.
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub events: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
    /// Extra environment for the daemon (after the isolating defaults).
    env: Vec<(String, String)>,
}

impl Daemon {
    /// The tree without the daemon: write history into it, then [`Daemon::start`].
    pub fn tree() -> Daemon {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(dir.path().join("claude")).expect("mkdir");
        fs::create_dir_all(dir.path().join("codex")).expect("mkdir");
        let events = dir.path().join("events.jsonl");
        let log = dir.path().join("baton.log");
        Daemon {
            dir,
            events,
            log,
            child: None,
            env: Vec::new(),
        }
    }

    /// Sets an environment variable for the daemon (e.g. a test D-Bus address).
    pub fn env(mut self, key: &str, value: &str) -> Daemon {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// `$XDG_RUNTIME_DIR` of the daemon and its clients: the socket is `baton/baton.sock`
    /// in it.
    pub fn runtime_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    /// `$XDG_CONFIG_HOME` of the daemon: write `baton/config.toml` in it before starting.
    pub fn config_home(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    /// A `baton` command isolated like the daemon (same runtime, config and state
    /// directories), e.g. for `status` and `tail`.
    pub fn baton(&self) -> Command {
        baton_in(self.dir.path(), "state")
    }

    /// Starts the daemon with extra flags and waits for `daemon_ready`.
    pub fn start(mut self, extra: &[&str]) -> Daemon {
        self.spawn(extra);
        self.wait_for("daemon_ready", |e| e["event"] == "daemon_ready");
        self
    }

    /// `baton run` on this tree (roots, `--events`, and this tree's `--state-dir`
    /// unless `extra` names one).
    pub fn command(&self, extra: &[&str]) -> Command {
        let root = self.dir.path();
        fs::create_dir_all(self.runtime_dir()).expect("mkdir run");
        let mut cmd = self.baton();
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.arg("run")
            .arg("--no-default-roots")
            .arg("--watch")
            .arg(format!("claude={}", root.join("claude").display()))
            .arg("--watch")
            .arg(format!("codex={}", root.join("codex").display()))
            .arg("--events")
            .arg(&self.events)
            .args(extra)
            // Each tree has its own state (tests run in parallel; one daemon per state
            // directory).
            .args(if extra.contains(&"--state-dir") {
                Vec::new()
            } else {
                vec![
                    "--state-dir".to_owned(),
                    self.state_dir().display().to_string(),
                ]
            })
            // Where this harness's `status` and `tail` look (a daemon given its own
            // state directory would otherwise listen in it).
            .args(if extra.contains(&"--socket") {
                Vec::new()
            } else {
                vec![
                    "--socket".to_owned(),
                    self.runtime_dir()
                        .join("baton/baton.sock")
                        .display()
                        .to_string(),
                ]
            })
            .env("BATON_LOG", "baton=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        cmd
    }

    /// Starts the daemon without waiting (its stderr appends to the log).
    pub fn spawn(&mut self, extra: &[&str]) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let child = self
            .command(extra)
            .stderr(log)
            .spawn()
            .expect("start baton");
        self.child = Some(child);
    }

    /// Starts the daemon through `wrapper` (e.g. `prlimit --nofile=1024:1024`), without
    /// waiting; the wrapper must exec the daemon, so [`Daemon::pid`] is the daemon's.
    pub fn spawn_wrapped(&mut self, wrapper: &[&str], extra: &[&str]) {
        let inner = self.command(extra);
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let mut cmd = Command::new(wrapper[0]);
        cmd.args(&wrapper[1..])
            .arg(inner.get_program())
            .args(inner.get_args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (k, v) in inner.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        self.child = Some(cmd.spawn().expect("start baton"));
    }

    /// Starts the daemon again on the same tree and state, and waits for its
    /// `daemon_ready`.
    pub fn restart(&mut self, extra: &[&str]) {
        let before = self
            .events()
            .iter()
            .filter(|e| e["event"] == "daemon_ready")
            .count();
        self.spawn(extra);
        self.wait_count("daemon_ready", before + 1, |e| e["event"] == "daemon_ready");
    }

    /// SIGTERM and wait; asserts a clean exit. The tree and state stay.
    pub fn terminate(&mut self) {
        let mut child = self.child.take().expect("running");
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait") {
                break s;
            }
            if start.elapsed() > DEADLINE {
                let _ = child.kill();
                self.fail("baton did not stop on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if !status.success() {
            self.fail(&format!("baton exited with {status}"));
        }
    }

    /// SIGTERM, then waits: how long the exit took and its status. A daemon still running
    /// at `limit` is given 15 s more, only so the failure can say how late it was
    /// (`None`: still running then; it is killed).
    pub fn sigterm_timed(&mut self, limit: Duration) -> Option<(Duration, ExitStatus)> {
        let mut child = self.child.take().expect("running");
        let sent = Instant::now();
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
        loop {
            if let Some(s) = child.try_wait().expect("wait") {
                return Some((sent.elapsed(), s));
            }
            if sent.elapsed() > limit + Duration::from_secs(15) {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The daemon's stderr so far.
    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until a line of the daemon's log matches. Fails the test if the daemon
    /// exits first, or at the deadline.
    pub fn wait_log(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self.log_text().lines().find(|l| pred(l)) {
                return l.to_owned();
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                self.fail(&format!(
                    "baton exited ({status}) while waiting for the log to say {what}"
                ));
            }
            if start.elapsed() > DEADLINE {
                self.fail(&format!("timed out waiting for the log to say {what}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the daemon is still running (reaps it if it exited).
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGKILL and wait. The tree and state stay.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("running");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The default `--state-dir` of this tree.
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn claude(&self) -> PathBuf {
        self.dir.path().join("claude")
    }

    pub fn codex(&self) -> PathBuf {
        self.dir.path().join("codex")
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Every complete event line so far.
    pub fn events(&self) -> Vec<Value> {
        let Ok(text) = read_regular(&self.events) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits until an event matches, and returns it. Fails the test at the deadline,
    /// printing what did arrive and the daemon's log.
    pub fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            if let Some(e) = self.events().into_iter().find(|e| pred(e)) {
                return e;
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                self.fail(&format!("baton exited ({status}) while waiting for {what}"));
            }
            if start.elapsed() > DEADLINE {
                self.fail(&format!("timed out waiting for {what}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `n` events match.
    pub fn wait_count(&mut self, what: &str, n: usize, pred: impl Fn(&Value) -> bool) {
        let start = Instant::now();
        loop {
            let got = self.events().iter().filter(|e| pred(e)).count();
            if got >= n {
                return;
            }
            if start.elapsed() > DEADLINE {
                self.fail(&format!("timed out waiting for {n} × {what} (got {got})"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn fail(&self, why: &str) -> ! {
        let events = read_regular(&self.events).unwrap_or_default();
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let tail: String = log
            .lines()
            .rev()
            .take(60)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        panic!("{why}\n--- events ---\n{events}\n--- log (tail) ---\n{tail}");
    }

    /// SIGTERM; asserts a clean exit and a final `daemon_stopping`. Returns all events.
    pub fn stop(self) -> Vec<Value> {
        self.stop_with_log().0
    }

    /// [`Daemon::stop`], also returning the daemon's stderr.
    pub fn stop_with_log(mut self) -> (Vec<Value>, String) {
        self.terminate();
        let events = self.events();
        assert_eq!(
            events.last().map(|e| e["event"].clone()),
            Some(json!("daemon_stopping")),
            "the last event must be daemon_stopping"
        );
        (events, fs::read_to_string(&self.log).unwrap_or_default())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A regular file's text (never a device such as `/dev/full`, which reads forever).
fn read_regular(path: &Path) -> std::io::Result<String> {
    if !fs::metadata(path)?.is_file() {
        return Ok(String::new());
    }
    fs::read_to_string(path)
}

/// The events of one kind about one turn.
pub fn count(events: &[Value], kind: &str, turn: &str) -> usize {
    events
        .iter()
        .filter(|e| e["event"] == kind && e["turn"] == turn)
        .count()
}

/// How many `anomaly` events carry `reason`.
pub fn anomalies(events: &[Value], reason: &str) -> usize {
    events
        .iter()
        .filter(|e| e["event"] == "anomaly" && e["reason"] == reason)
        .count()
}

pub fn is(kind: &'static str, turn: String) -> impl Fn(&Value) -> bool {
    move |e| e["event"] == kind && e["turn"] == turn.as_str()
}

/// RFC 3339 UTC with milliseconds, `ago` before now.
pub fn ts_ago(ago: Duration) -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis()
        - ago.as_millis();
    let secs = (ms / 1000) as i64;
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60,
        ms % 1000
    )
}

pub fn ts_now() -> String {
    ts_ago(Duration::ZERO)
}

/// A fresh UUID-shaped id (unique within the test run).
pub fn uuid() -> String {
    static N: AtomicU64 = AtomicU64::new(1);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos() as u64;
    let pid = u64::from(std::process::id());
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        (t & 0xffff_ffff) as u32,
        (pid & 0xffff) as u16,
        (n & 0xffff) as u16,
        ((t >> 32) & 0xffff) as u16,
        n
    )
}

/// Claude Code records.
pub struct Claude {
    pub session: String,
}

impl Claude {
    pub fn new() -> Self {
        Claude { session: uuid() }
    }

    /// `<dir>/<session>.jsonl`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.jsonl", self.session))
    }

    /// A prompt; returns (line, turn id).
    pub fn prompt_at(&self, text: &str, ts: &str) -> (String, String) {
        let id = uuid();
        let line = json!({
            "type": "user", "uuid": id, "sessionId": self.session, "timestamp": ts,
            "message": {"role": "user", "content": text}
        });
        (format!("{line}\n"), id)
    }

    pub fn prompt(&self, text: &str) -> (String, String) {
        self.prompt_at(text, &ts_now())
    }

    /// A final answer with `stop_reason: end_turn` (completes at once).
    pub fn answer_at(&self, text: &str, ts: &str) -> String {
        let line = json!({
            "type": "assistant", "uuid": uuid(), "sessionId": self.session, "timestamp": ts,
            "message": {"role": "assistant", "model": "claude-test",
                        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
        });
        format!("{line}\n")
    }

    pub fn answer(&self, text: &str) -> String {
        self.answer_at(text, &ts_now())
    }

    /// A whole turn: (bytes, turn id).
    pub fn turn(&self, prompt: &str, answer: &str) -> (String, String) {
        let (p, id) = self.prompt(prompt);
        (p + &self.answer(answer), id)
    }
}

/// Codex rollout records.
pub struct Codex {
    pub session: String,
}

impl Codex {
    pub fn new() -> Self {
        Codex { session: uuid() }
    }

    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(format!(
            "rollout-2026-11-29T10-00-00-{}.jsonl",
            self.session
        ))
    }

    pub fn meta(&self) -> String {
        let line = json!({"timestamp": ts_now(), "type": "session_meta",
            "payload": {"id": self.session, "timestamp": ts_now(), "cwd": "/tmp", "originator": "codex_cli_rs"}});
        format!("{line}\n")
    }

    /// A rollout under `root`'s date folders, its meta and a `task_started` written now,
    /// and no end: (its path, the turn id).
    pub fn working_in(&self, root: &Path) -> (PathBuf, String) {
        let dir = root.join("2026").join("11").join("29");
        fs::create_dir_all(&dir).expect("the rollout's folder");
        let path = self.path_in(&dir);
        let turn = uuid();
        let open = json!({"timestamp": ts_now(), "type": "event_msg",
            "payload": {"type": "task_started", "turn_id": turn}});
        append(&path, format!("{}{open}\n", self.meta()).as_bytes());
        (path, turn)
    }

    /// task_started + task_complete: (bytes, turn id).
    pub fn turn(&self, answer: &str) -> (String, String) {
        let turn = uuid();
        let a = json!({"timestamp": ts_now(), "type": "event_msg",
            "payload": {"type": "task_started", "turn_id": turn}});
        let b = json!({"timestamp": ts_now(), "type": "event_msg",
            "payload": {"type": "task_complete", "turn_id": turn, "last_agent_message": answer}});
        (format!("{a}\n{b}\n"), turn)
    }
}

/// A child that is killed and reaped when the test lets go of it, even on a panic.
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Kill {
    /// Ends the process and waits until it is gone (reaped).
    pub fn exit(mut self) {
        self.0.kill().expect("kill");
        self.0.wait().expect("reap");
    }
}

/// A `baton` command isolated to `dir`: `$XDG_RUNTIME_DIR` is `dir/run`,
/// `$XDG_CONFIG_HOME` `dir/config`, `$XDG_STATE_HOME` `dir/<state>`, and the session bus
/// a path where none listens (never a real desktop: tests that want one set their own).
pub fn baton_in(dir: &Path, state: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_baton"));
    c.env("XDG_RUNTIME_DIR", dir.join("run"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_STATE_HOME", dir.join(state))
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", dir.join("no-bus").display()),
        );
    c
}

/// A process holding `path` open for writing (fd 3), as Codex holds its rollout, once
/// `/proc` shows it so (its executable `sleep`, fd 3 the file), so a liveness check
/// cannot race its start.
pub fn writer_of(path: &Path) -> Kill {
    let child = Command::new("sh")
        .args(["-c", "exec 3>>\"$0\"; exec sleep 600"])
        .arg(path)
        .spawn()
        .expect("starts the writer");
    let pid = child.id();
    let writer = Kill(child);
    let real = fs::canonicalize(path).expect("the transcript's real path");
    let (exe, fd) = (
        PathBuf::from(format!("/proc/{pid}/exe")),
        PathBuf::from(format!("/proc/{pid}/fd/3")),
    );
    for _ in 0..500 {
        if fs::read_link(&exe).is_ok_and(|e| e.ends_with("sleep"))
            && fs::read_link(&fd).is_ok_and(|t| t == real)
        {
            return writer;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the writer of {} never got ready", path.display());
}

/// Appends bytes (one write).
pub fn append(path: &Path, bytes: &[u8]) {
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open for append");
    f.write_all(bytes).expect("append");
}

/// `baton tail ARGS` against `d`'s daemon, its stdout lines on a channel
/// ([`stdout_lines`]) and its stderr as given.
pub fn tail(
    d: &Daemon,
    args: &[&str],
    stderr: Stdio,
) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = d
        .baton()
        .arg("tail")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("starts baton tail");
    let lines = stdout_lines(&mut child);
    (child, lines)
}

/// A child's stdout, line by line, on a channel (read on a thread of its own, so a test
/// can wait with a deadline). Takes the child's piped stdout.
pub fn stdout_lines(child: &mut Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let out = child.stdout.take().expect("stdout is piped");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    lines
}
