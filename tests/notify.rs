//! Notifications you can act on, on a real desktop (Xvfb, openbox, dunst, tmux, xterm):
//! kinds' hints as dunst records them, `baton mute`, a click (`dunstctl action`) going
//! back to the agent's tmux pane and raising its xterm, and no notification while that
//! pane is in front. The agent is a copy of `sleep` named `claude`, run in the
//! session's `cwd` inside a tmux pane.

#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/desktop.rs"]
mod desktop;

use common::{Daemon, append};
use desktop::{Desktop, wait};
use serde_json::{Value, json};
use std::path::Path;
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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `status --json` prints the rows only; the end line is asked for directly.
    let _ = out;
    let sock = d.runtime_dir().join("baton").join("baton.sock");
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    use std::io::{BufRead, Write};
    writeln!(s, "{{\"cmd\":\"status\"}}").unwrap();
    let lines: Vec<String> = std::io::BufReader::new(s)
        .lines()
        .map(Result::unwrap)
        .collect();
    serde_json::from_str(lines.last().unwrap()).unwrap()
}

#[test]
fn click_goes_back_to_the_agent_and_a_focused_pane_stays_quiet() {
    let d = Daemon::tree();
    let Some(mut desk) = Desktop::start() else {
        return;
    };
    let cwd = d.dir.path().join("myproj");
    std::fs::create_dir_all(&cwd).unwrap();
    // The fake agent: `sleep` under the name `claude`.
    let agent_bin = d.dir.path().join("bin").join("claude");
    std::fs::create_dir_all(agent_bin.parent().unwrap()).unwrap();
    std::fs::copy("/bin/sleep", &agent_bin).unwrap();
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
    let mut xterm = desk.cmd("xterm");
    xterm.args(["-e", "tmux", "-S", &sock, "attach", "-t", "work"]);
    let xterm_pid = desk.spawn(xterm);
    wait("the tmux client", LIMIT, || {
        (!desk.tmux(&["list-clients"]).is_empty()).then_some(())
    });
    let xterm_win = wait("the xterm window", LIMIT, || desk.window_of(xterm_pid));
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
    std::fs::write(&script, "#!/bin/sh\nenv | grep '^BATON_' > \"$1\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
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
        std::fs::write(
            &p,
            format!("#!/bin/sh\necho \"$@\" > {}\n", saved.display()),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
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
    let project_dir = d.claude().join("projects").join("-myproj");
    std::fs::create_dir_all(&project_dir).unwrap();
    let session = common::uuid();
    let path = project_dir.join(format!("{session}.jsonl"));

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
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
    let other = common::uuid();
    let other_path = project_dir.join(format!("{other}.jsonl"));
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
