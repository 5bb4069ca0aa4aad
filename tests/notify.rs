//! Notifications you can act on, on a real desktop (Xvfb, openbox, dunst, tmux, xterm):
//! kinds' hints as dunst records them, `baton mute`, a click (`dunstctl action`) going
//! back to the agent's tmux pane and raising its xterm, and no notification while that
//! pane is in front; the exec hook and a webhook quiet then too only when they ask
//! (`suppress_when_focused`). The agent is a copy of `sleep` named `claude`, run in the
//! session's `cwd` inside a tmux pane.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::common::desktop;

use crate::common::{Daemon, append};
use desktop::{Desktop, wait};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

fn record(kind: &str, session: &str, cwd: &Path, text: &str) -> String {
    let ts = common::ts_now();
    let id = common::uuid();
    let line = if kind == "user" {
        json!({"type": "user", "uuid": id, "sessionId": session, "timestamp": ts, "cwd": cwd,
               "message": {"role": "user", "content": text}})
    } else {
        json!({"type": "assistant", "uuid": id, "sessionId": session, "timestamp": ts, "cwd": cwd,
               "message": {"role": "assistant", "model": "claude-test",
                           "content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}})
    };
    format!("{line}\n")
}

/// One turn of the session; returns when its `turn_completed` is in the stream.
fn turn(d: &mut Daemon, path: &Path, session: &str, cwd: &Path, answer: &str) {
    let before = d
        .events()
        .iter()
        .filter(|e| e["event"] == "turn_completed")
        .count();
    let bytes = record("user", session, cwd, "go") + &record("assistant", session, cwd, answer);
    append(path, bytes.as_bytes());
    d.wait_count("turn_completed", before + 1, |e| {
        e["event"] == "turn_completed"
    });
}

fn history(desk: &Desktop) -> Vec<Value> {
    let h: Value = serde_json::from_str(&desk.dunstctl(&["history"])).unwrap_or(Value::Null);
    h["data"][0].as_array().cloned().unwrap_or_default()
}

fn field<'a>(n: &'a Value, key: &str) -> &'a Value {
    &n[key]["data"]
}

fn status_end(d: &Daemon) -> Value {
    let out = d.baton().args(["status", "--json"]).output().unwrap();
    common::assert_ok(&out);
    // `status --json` prints the rows only; the end line is asked for directly.
    let sock = d.runtime_dir().join("baton").join("baton.sock");
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    writeln!(s, "{{\"cmd\":\"status\"}}").unwrap();
    let lines: Vec<String> = BufReader::new(s).lines().map(Result::unwrap).collect();
    serde_json::from_str(lines.last().unwrap()).unwrap()
}

/// The session's start directory (`myproj`) and the fake agent: `sleep` under the name
/// `claude`, which the liveness rule takes for Claude Code.
fn fake_agent(d: &Daemon) -> (PathBuf, PathBuf) {
    let cwd = d.dir.path().join("myproj");
    std::fs::create_dir_all(&cwd).unwrap();
    let agent_bin = d.dir.path().join("bin").join("claude");
    std::fs::create_dir_all(agent_bin.parent().unwrap()).unwrap();
    std::fs::copy("/bin/sleep", &agent_bin).unwrap();
    (cwd, agent_bin)
}

/// An xterm attached to the tmux session `work`: its window, once the client is
/// attached and the window mapped.
fn attach_xterm(desk: &mut Desktop, sock: &str) -> u64 {
    let mut xterm = desk.cmd("xterm");
    xterm.args(["-e", "tmux", "-S", sock, "attach", "-t", "work"]);
    let pid = desk.spawn(xterm);
    wait("the tmux client", LIMIT, || {
        (!desk.tmux(&["list-clients"]).is_empty()).then_some(())
    });
    wait("the xterm window", LIMIT, || desk.window_of(pid))
}

/// A new Claude session's transcript path in the daemon's tree, and the session id.
fn claude_session(d: &Daemon) -> (PathBuf, String) {
    let project_dir = d.claude().join("projects").join("-myproj");
    std::fs::create_dir_all(&project_dir).unwrap();
    let session = common::uuid();
    (project_dir.join(format!("{session}.jsonl")), session)
}

/// Writes an executable script at `path`.
fn script_at(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn click_goes_back_to_the_agent_and_a_focused_pane_stays_quiet() {
    let d = Daemon::tree();
    let Some(mut desk) = Desktop::start() else {
        return;
    };
    let (cwd, agent_bin) = fake_agent(&d);
    let sock = desk.tmux_socket.display().to_string();
    let cwd_s = cwd.display().to_string();
    // Window 0: a shell; window 1: the agent. Window 0 is left in front.
    desk.tmux(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "work",
        "-c",
        &cwd_s,
        "sleep",
        "1000",
    ]);
    desk.tmux(&[
        "new-window",
        "-t",
        "work",
        "-c",
        &cwd_s,
        // As if tmux ran inside WezTerm and kitty: their panes are named too.
        "-e",
        "WEZTERM_PANE=7",
        "-e",
        "KITTY_WINDOW_ID=3",
        "-e",
        "KITTY_LISTEN_ON=unix:/tmp/kitty-test",
        agent_bin.to_str().unwrap(),
        "1000",
    ]);
    let agent_pane = desk.tmux(&["display-message", "-p", "-t", "work:1", "#{pane_id}"]);
    desk.tmux(&["select-window", "-t", "work:0"]);
    let xterm_win = attach_xterm(&mut desk, &sock);
    // Another window in front of it.
    let mut other = desk.cmd("xterm");
    other.args(["-e", "sleep", "1000"]);
    let other_pid = desk.spawn(other);
    let other_win = wait("the other xterm", LIMIT, || desk.window_of(other_pid));
    wait("the other xterm active", LIMIT, || {
        (desk.active_window() == Some(other_win)).then_some(())
    });

    // No cooldown: the test's turns come seconds apart.
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    // on_click: a script of the test's that saves what it is told.
    let script = d.dir.path().join("on-click");
    let clicked = d.dir.path().join("clicked.env");
    script_at(&script, "#!/bin/sh\nenv | grep '^BATON_' > \"$1\"\n");
    std::fs::write(
        &cfg,
        format!(
            "needs_input_grace = \"0s\"\n[desktop]\ncooldown = \"0s\"\non_click = [{:?}, {:?}]\n",
            script.display().to_string(),
            clicked.display().to_string()
        ),
    )
    .unwrap();
    let notes = desk.monitor();
    // Stand-ins for the `wezterm` and `kitty` CLIs: they save their arguments.
    let fake = d.dir.path().join("fakebin");
    std::fs::create_dir_all(&fake).unwrap();
    for prog in ["wezterm", "kitty"] {
        let p = fake.join(prog);
        let saved = d.dir.path().join(format!("{prog}.args"));
        script_at(
            &p,
            &format!("#!/bin/sh\necho \"$@\" > {}\n", saved.display()),
        );
    }
    let path_var = format!(
        "{}:{}",
        fake.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut d = d
        .env("PATH", &path_var)
        .env("DISPLAY", &desk.display)
        .env("DBUS_SESSION_BUS_ADDRESS", &desk.bus)
        .start(&[]);
    let (path, session) = claude_session(&d);

    // --- A completion shows, with its kind's hints and a default action.
    turn(&mut d, &path, &session, &cwd, "All <b>done</b>");
    wait("the notification", LIMIT, || {
        (desk.displayed() == 1).then_some(())
    });
    let shot = std::env::var_os("BATON_NOTIFY_SHOT");
    if let Some(p) = &shot {
        desk.screenshot(Path::new(p));
    }

    // --- Muted: the next completion streams but shows nothing new.
    let out = d
        .baton()
        .args(["mute", "myproj", "--for", "1h"])
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Muted myproj"));
    let shown_before = desk.displayed() + history(&desk).len();
    turn(&mut d, &path, &session, &cwd, "muted answer");
    let end = status_end(&d);
    assert_eq!(end["mutes"][0]["target"], "myproj", "{end}");
    wait("the mute noted", LIMIT, || {
        (status_end(&d)["held"][0]["reason"] == "muted_for").then_some(())
    });
    let human = d.baton().arg("status").output().unwrap();
    assert!(
        String::from_utf8_lossy(&human.stdout).contains("Muted: myproj (until"),
        "{}",
        String::from_utf8_lossy(&human.stdout)
    );
    assert_eq!(desk.displayed() + history(&desk).len(), shown_before);
    let out = d.baton().args(["unmute", "myproj"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Unmuted myproj"));

    // --- The click: back to the agent's pane, its xterm raised.
    let pane_before = desk.tmux(&["display-message", "-p", "-t", "work", "#{pane_id}"]);
    let win_before = desk.active_window();
    assert_ne!(pane_before, agent_pane);
    assert_eq!(win_before, Some(other_win));
    desk.dunstctl(&["action", "0"]);
    wait("the agent's pane active", LIMIT, || {
        (desk.tmux(&["display-message", "-p", "-t", "work", "#{pane_id}"]) == agent_pane)
            .then_some(())
    });
    wait("the xterm active", LIMIT, || {
        (desk.active_window() == Some(xterm_win)).then_some(())
    });
    let env = wait("on_click", LIMIT, || {
        std::fs::read_to_string(&clicked)
            .ok()
            .filter(|s| s.contains("BATON_PATH"))
    });
    let agent_pid = desk.tmux(&["display-message", "-p", "-t", "work:1", "#{pane_pid}"]);
    for line in [
        format!("BATON_PID={agent_pid}"),
        format!("BATON_TMUX_PANE={agent_pane}"),
        format!("BATON_CWD={cwd_s}"),
        "BATON_PROJECT=myproj".to_owned(),
        format!("BATON_SESSION={session}"),
        "BATON_PROVIDER=claude".to_owned(),
        format!("BATON_PATH={}", path.display()),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} not in:\n{env}");
    }
    let args = |prog: &str| {
        let f = d.dir.path().join(format!("{prog}.args"));
        wait(prog, LIMIT, || {
            std::fs::read_to_string(&f)
                .ok()
                .filter(|s| s.ends_with('\n'))
        })
    };
    assert_eq!(args("wezterm"), "cli activate-pane --pane-id 7\n");
    assert_eq!(
        args("kitty"),
        "@ --to unix:/tmp/kitty-test focus-window --match id:3\n"
    );
    let pane_after = desk.tmux(&["display-message", "-p", "-t", "work", "#{pane_id}"]);
    let win_after = desk.active_window();

    // --- In front now: a completion streams but is not shown.
    desk.dunstctl(&["close-all"]);
    wait("closed", LIMIT, || (desk.displayed() == 0).then_some(()));
    let seen = history(&desk).len();
    turn(&mut d, &path, &session, &cwd, "while you look");
    wait("the focus noted", LIMIT, || {
        (status_end(&d)["held"][0]["reason"] == "focused").then_some(())
    });
    assert_eq!(desk.displayed(), 0);
    assert_eq!(history(&desk).len(), seen);

    // --- Kinds look and sound different: a question from a session with no agent.
    let (other_path, other) = claude_session(&d);
    let ask = json!({"type": "assistant", "uuid": common::uuid(), "sessionId": other,
        "timestamp": common::ts_now(), "cwd": d.dir.path().join("elsewhere"),
        "message": {"role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "AskUserQuestion",
                "input": {"questions": [{"question": "Pick one?"}]}}]}});
    append(
        &other_path,
        (record("user", &other, &d.dir.path().join("elsewhere"), "go") + &format!("{ask}\n"))
            .as_bytes(),
    );
    d.wait_for("needs_input", |e| e["event"] == "needs_input");
    wait("the question shown", LIMIT, || {
        (desk.displayed() == 1).then_some(())
    });
    let calls = notes.lock().unwrap().clone();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    let (done, ask) = (&calls[0], &calls[1]);
    assert_eq!(done.summary, "Claude Code · myproj: your turn");
    assert_eq!(
        (done.urgency, done.sound_name.as_deref(), done.timeout),
        (Some(1), Some("complete"), -1)
    );
    assert_eq!(done.actions, ["default", "Open", "open", "Open"]);
    assert_eq!(done.desktop_entry.as_deref(), Some("baton"));
    assert!(!done.app_icon.is_empty());
    assert_eq!(ask.summary, "Claude Code · elsewhere: needs your answer");
    assert_eq!(
        (ask.urgency, ask.sound_name.as_deref(), ask.timeout),
        (Some(2), Some("dialog-question"), 0)
    );
    assert_eq!(ask.category.as_deref(), Some("im.received"));

    // What dunst recorded of the first notification.
    let h = history(&desk);
    let first = h
        .iter()
        .find(|n| {
            field(n, "body")
                .as_str()
                .is_some_and(|b| b.contains("done"))
        })
        .unwrap();
    if let Some(evidence) = std::env::var_os("BATON_NOTIFY_EVIDENCE") {
        let text = format!(
            "dunstctl history (first notification):\n{}\n\ntmux active pane before/after click: {pane_before} -> {pane_after} (agent's: {agent_pane})\n_NET_ACTIVE_WINDOW before/after click: {:#x} -> {:#x} (xterm running tmux: {xterm_win:#x}; other xterm: {other_win:#x})\n",
            serde_json::to_string_pretty(first).unwrap(),
            win_before.unwrap_or(0),
            win_after.unwrap_or(0),
        );
        std::fs::write(evidence, text).unwrap();
    }
    assert_eq!(field(first, "appname"), "baton");
    assert_eq!(field(first, "category"), "im.received");
    assert_eq!(field(first, "summary"), "Claude Code · myproj: your turn");
    assert_eq!(field(first, "default_action_name"), "default");
    d.stop();
}

/// A webhook endpoint on 127.0.0.1 that answers 200 and keeps each request's body.
fn webhook_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&bodies);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            conn.set_read_timeout(Some(LIMIT)).unwrap();
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim_end().is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            kept.lock().unwrap().push(String::from_utf8(body).unwrap());
            let mut conn = conn;
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (url, bodies)
}

/// The config: the exec hook (writing its stdin to `out`), focus-quiet if `hook_quiet`,
/// and two webhooks, the first focus-quiet.
fn hooks_config(d: &Daemon, script: &Path, out: &Path, hook_quiet: bool, urls: [&str; 2]) {
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    let quiet = if hook_quiet {
        "suppress_when_focused = true\n"
    } else {
        ""
    };
    std::fs::write(
        &cfg,
        format!(
            "needs_input_grace = \"0s\"\n[desktop]\ncooldown = \"0s\"\n\
             [on_event]\ncommand = [{:?}, {:?}]\n{quiet}\
             [[webhook]]\nurl = {:?}\nsuppress_when_focused = true\n\
             [[webhook]]\nurl = {:?}\n",
            script.display().to_string(),
            out.display().to_string(),
            urls[0],
            urls[1],
        ),
    )
    .unwrap();
}

/// The sinks the status end line says held the session's latest page.
fn held_by(d: &Daemon) -> Vec<String> {
    let end = status_end(d);
    end["held"][0]["sinks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// The `Sink closed.` log line of each sink, in the order they closed.
fn closed_lines(log: &str, sink: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("Sink closed.") && l.contains(&format!("sink=\"{sink}\"")))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_exec_hook_and_a_webhook_stay_quiet_while_you_look_only_when_asked() {
    let d = Daemon::tree();
    let Some(mut desk) = Desktop::start() else {
        return;
    };
    let (cwd, agent_bin) = fake_agent(&d);
    let sock = desk.tmux_socket.display().to_string();
    // The agent alone in its tmux session: its pane is the active one.
    desk.tmux(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "work",
        "-c",
        cwd.to_str().unwrap(),
        agent_bin.to_str().unwrap(),
        "1000",
    ]);
    let xterm_win = attach_xterm(&mut desk, &sock);
    wait("the xterm active", LIMIT, || {
        (desk.active_window() == Some(xterm_win)).then_some(())
    });

    let script = d.dir.path().join("hook");
    script_at(&script, "#!/bin/sh\ncat > \"$1\"\n");
    let (quiet_url, quiet_got) = webhook_server();
    let (loud_url, loud_got) = webhook_server();
    let ran: PathBuf = d.dir.path().join("hook-ran.json");
    hooks_config(&d, &script, &ran, true, [&quiet_url, &loud_url]);
    let mut d = d
        .env("DISPLAY", &desk.display)
        .env("DBUS_SESSION_BUS_ADDRESS", &desk.bus)
        .start(&[]);
    let (path, session) = claude_session(&d);

    // --- In front, both asking: no run, no post; the webhook that did not ask posts.
    turn(&mut d, &path, &session, &cwd, "first answer");
    wait("the loud webhook", LIMIT, || {
        (loud_got.lock().unwrap().len() == 1).then_some(())
    });
    let loud: Value = serde_json::from_str(&loud_got.lock().unwrap()[0]).unwrap();
    assert_eq!(
        (loud["event"].as_str(), loud["session"].as_str()),
        (Some("turn_completed"), Some(session.as_str()))
    );
    // Once `status` says they held it (the desktop too, by default), neither will send
    // it.
    wait("the desktop, exec hook and webhook noted", LIMIT, || {
        let s = held_by(&d);
        ["desktop", "exec", "webhook"]
            .iter()
            .all(|k| s.iter().any(|s| s == k))
            .then_some(())
    });
    let end = status_end(&d);
    assert_eq!(end["held"][0]["reason"], "focused", "{end}");
    assert_eq!(
        end["held"].as_array().map(Vec::len),
        Some(1),
        "one entry: {end}"
    );
    let human = d.baton().arg("status").output().unwrap();
    assert!(
        String::from_utf8_lossy(&human.stdout).contains("Not shown: myproj (focused"),
        "{}",
        String::from_utf8_lossy(&human.stdout)
    );
    assert!(!ran.exists(), "the quiet hook ran");
    assert!(
        quiet_got.lock().unwrap().is_empty(),
        "the quiet webhook was posted to"
    );
    // Counted in each sink's stats (logged as it closes).
    d.terminate();
    let log = d.log_text();
    let exec = closed_lines(&log, "exec");
    assert!(
        exec.len() == 1 && exec[0].contains("ok: 0") && exec[0].contains("focused: 1"),
        "{exec:?}"
    );
    let hooks = closed_lines(&log, "webhook");
    let focused: Vec<bool> = hooks.iter().map(|l| l.contains("focused: 1")).collect();
    assert_eq!(hooks.len(), 2, "{hooks:?}");
    assert!(
        focused.contains(&true) && focused.contains(&false),
        "{hooks:?}"
    );

    // --- Still in front, the hook no longer asking: it runs; the quiet webhook still
    // posts nothing.
    hooks_config(&d, &script, &ran, false, [&quiet_url, &loud_url]);
    d.restart(&[]);
    turn(&mut d, &path, &session, &cwd, "second answer");
    let got = wait("the hook's run", LIMIT, || {
        std::fs::read_to_string(&ran)
            .ok()
            .filter(|s| s.ends_with('\n'))
    });
    let ev: Value = serde_json::from_str(got.trim_end()).unwrap();
    assert_eq!(
        (ev["event"].as_str(), ev["session"].as_str()),
        (Some("turn_completed"), Some(session.as_str()))
    );
    wait("the loud webhook again", LIMIT, || {
        (loud_got.lock().unwrap().len() == 2).then_some(())
    });
    let sinks = wait("the webhook noted", LIMIT, || {
        let s = held_by(&d);
        s.iter().any(|s| s == "webhook").then_some(s)
    });
    assert!(!sinks.iter().any(|s| s == "exec"), "{sinks:?}");
    assert!(
        quiet_got.lock().unwrap().is_empty(),
        "the quiet webhook was posted to"
    );
    let (_, log) = d.stop_with_log();
    let exec = closed_lines(&log, "exec");
    assert!(
        exec.last()
            .is_some_and(|l| l.contains("ok: 1") && l.contains("focused: 0")),
        "{exec:?}"
    );
}

/// Without a way to know the window in front (the daemon has no `DISPLAY`), a tmux pane
/// showing in an attached client is not "in front": another window may have the focus
/// (here it has), so the page is shown, and the log says why once.
#[test]
fn a_visible_pane_is_not_in_front_when_the_window_cannot_be_known() {
    let d = Daemon::tree();
    let Some(mut desk) = Desktop::start() else {
        return;
    };
    let (cwd, agent_bin) = fake_agent(&d);
    let sock = desk.tmux_socket.display().to_string();
    desk.tmux(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-s",
        "work",
        "-c",
        cwd.to_str().unwrap(),
        agent_bin.to_str().unwrap(),
        "1000",
    ]);
    let _xterm_win = attach_xterm(&mut desk, &sock);
    // Another window has the focus; the daemon cannot see it.
    let mut other = desk.cmd("xterm");
    other.args(["-e", "sleep", "1000"]);
    let other_pid = desk.spawn(other);
    let other_win = wait("the other xterm", LIMIT, || desk.window_of(other_pid));
    wait("the other xterm active", LIMIT, || {
        (desk.active_window() == Some(other_win)).then_some(())
    });
    let agent_pane = desk.tmux(&["display-message", "-p", "-t", "work", "#{pane_id}"]);
    assert!(!agent_pane.is_empty());

    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(&cfg, "[desktop]\ncooldown = \"0s\"\n").unwrap();
    let notes = desk.monitor();
    let mut d = d
        .env("DISPLAY", "")
        .env("WAYLAND_DISPLAY", "")
        .env("DBUS_SESSION_BUS_ADDRESS", &desk.bus)
        .start(&[]);
    let (path, session) = claude_session(&d);
    for (i, answer) in ["first", "second"].iter().enumerate() {
        turn(&mut d, &path, &session, &cwd, answer);
        // Before: held back as `focused` (the visible pane was taken for "in front").
        wait("the page shown", LIMIT, || {
            (notes.lock().unwrap().len() > i).then_some(())
        });
    }
    assert!(status_end(&d)["held"].as_array().is_none_or(Vec::is_empty));
    let log = d.log_text();
    let said = log
        .lines()
        .filter(|l| l.contains("Cannot tell which window is in front"))
        .count();
    assert_eq!(said, 1, "{log}");
    d.stop();
}
