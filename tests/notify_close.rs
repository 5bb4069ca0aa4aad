//! A question's popup goes when its wait ends, on a real desktop (Xvfb, openbox, dunst):
//! answered (`needs_input_resolved`) or superseded (the person typed a new prompt
//! instead), the red, sticky "needs your answer" notification is closed
//! (`CloseNotification`), not left on screen.

#![allow(clippy::unwrap_used)]

use crate::common;
use crate::common::desktop;

use crate::common::{Daemon, append};
use desktop::{Desktop, wait};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

fn user(session: &str, cwd: &Path, content: serde_json::Value) -> String {
    let line = json!({"type": "user", "uuid": common::uuid(), "sessionId": session,
        "timestamp": common::ts_now(), "cwd": cwd,
        "message": {"role": "user", "content": content}});
    format!("{line}\n")
}

fn ask(session: &str, cwd: &Path, tool: &str) -> String {
    let line = json!({"type": "assistant", "uuid": common::uuid(), "sessionId": session,
        "timestamp": common::ts_now(), "cwd": cwd,
        "message": {"role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": tool, "name": "AskUserQuestion",
                "input": {"questions": [{"question": "Pick one?"}]}}]}});
    format!("{line}\n")
}

fn session(d: &Daemon, cwd: &Path) -> (PathBuf, String) {
    let dir = d.claude().join(cwd.display().to_string().replace('/', "-"));
    std::fs::create_dir_all(&dir).unwrap();
    let s = common::uuid();
    (dir.join(format!("{s}.jsonl")), s)
}

fn count(d: &Daemon, kind: &str, session: &str) -> usize {
    d.events()
        .iter()
        .filter(|e| e["event"] == kind && e["session"] == session)
        .count()
}

#[test]
fn an_answered_or_superseded_question_closes_its_popup() {
    let d = Daemon::tree();
    let Some(desk) = Desktop::start() else {
        return;
    };
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(
        &cfg,
        "needs_input_grace = \"0s\"\n[desktop]\ncooldown = \"0s\"\n",
    )
    .unwrap();
    let mut d = d
        .env("DISPLAY", &desk.display)
        .env("DBUS_SESSION_BUS_ADDRESS", &desk.bus)
        .start(&[]);
    let cwd = d.dir.path().join("asker");

    // --- Answered: the tool result comes back; the popup goes.
    let (path, s) = session(&d, &cwd);
    append(
        &path,
        (user(&s, &cwd, json!("go")) + &ask(&s, &cwd, "toolu_1")).as_bytes(),
    );
    d.wait_for("needs_input", |e| e["event"] == "needs_input");
    wait("the question shown", LIMIT, || {
        (desk.displayed() == 1).then_some(())
    });
    let answer = json!([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"}]);
    append(&path, user(&s, &cwd, answer).as_bytes());
    d.wait_for("needs_input_resolved", |e| {
        e["event"] == "needs_input_resolved"
    });
    // Before: still 1 (the popup stayed until the person closed it).
    wait("the answered question's popup closed", LIMIT, || {
        (desk.displayed() == 0).then_some(())
    });

    // --- Superseded: a new prompt instead of an answer; the popup goes too.
    let (path, s) = session(&d, &cwd);
    append(
        &path,
        (user(&s, &cwd, json!("go")) + &ask(&s, &cwd, "toolu_2")).as_bytes(),
    );
    wait("the second question shown", LIMIT, || {
        (desk.displayed() == 1).then_some(())
    });
    let started = count(&d, "turn_started", &s);
    append(&path, user(&s, &cwd, json!("never mind, do B")).as_bytes());
    d.wait_count("the next turn", started + 1, |e| {
        e["event"] == "turn_started"
    });
    wait("the superseded question's popup closed", LIMIT, || {
        (desk.displayed() == 0).then_some(())
    });
    // Closed, not expired: dunst keeps closed notifications in its history.
    assert!(!desk.dunstctl(&["history"]).is_empty());
    d.stop();
}
