//! `baton run` end to end for Cursor, Copilot CLI and Pi: sessions in roots that appear
//! after start, and files truncated and rewritten. Waits have deadlines but nothing asserts
//! how fast an event came.

#![allow(clippy::unwrap_used)]

use crate::common::{Daemon, append, count, is, ts_now, uuid};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One agent's session: its file and how to write a whole turn.
struct Agent {
    provider: &'static str,
    path: PathBuf,
    session: String,
    /// Turns written so far (Cursor numbers its turns by position).
    turns: u32,
}

impl Agent {
    /// A session in a fresh nested directory under the agent's layout below `root`.
    fn new(provider: &'static str, root: &Path) -> Agent {
        let session = uuid();
        let path = match provider {
            "cursor" => root
                .join("home-u-web")
                .join("agent-transcripts")
                .join(&session)
                .join(format!("{session}.jsonl")),
            "copilot" => root.join(&session).join("events.jsonl"),
            _ => root
                .join("--home-u-web--")
                .join(format!("2026-11-30T10-00-00-000Z_{session}.jsonl")),
        };
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        Agent {
            provider,
            path,
            session,
            turns: 0,
        }
    }

    /// The session's first record, if the agent writes one.
    fn header(&self) -> String {
        match self.provider {
            "pi" => format!(
                "{}\n",
                json!({"type": "session", "version": 3, "id": self.session,
                    "timestamp": ts_now(), "cwd": "/home/u/web"})
            ),
            "copilot" => format!(
                "{}\n",
                json!({"type": "session.start", "data": {"sessionId": self.session},
                    "id": uuid(), "timestamp": ts_now(), "parentId": null})
            ),
            _ => String::new(),
        }
    }

    /// A prompt and the answer that ends the turn: (bytes, turn id).
    fn turn(&mut self, answer: &str) -> (String, String) {
        self.turns += 1;
        let lines: Vec<Value> = match self.provider {
            "cursor" => vec![
                json!({"role": "user", "message": {"content": [{"type": "text", "text": "go"}]}}),
                json!({"role": "assistant", "message": {"content": [{"type": "text", "text": answer}]}}),
                json!({"type": "turn_ended", "status": "success"}),
            ],
            "copilot" => {
                let interaction = uuid();
                let env = |ty: &str, data: Value| {
                    json!({"type": ty, "data": data, "id": uuid(), "timestamp": ts_now(),
                        "parentId": null})
                };
                let lines = [
                    env(
                        "user.message",
                        json!({"content": "go", "interactionId": interaction}),
                    ),
                    env("assistant.turn_start", json!({"turnId": "0"})),
                    env(
                        "assistant.message",
                        json!({"messageId": uuid(), "content": answer, "toolRequests": []}),
                    ),
                    env("assistant.turn_end", json!({"turnId": "0"})),
                ];
                let bytes: String = lines.iter().map(|l| format!("{l}\n")).collect();
                return (bytes, interaction);
            }
            _ => {
                let id = entry_id();
                let lines = [
                    json!({"type": "message", "id": id, "parentId": null, "timestamp": ts_now(),
                        "message": {"role": "user", "content": [{"type": "text", "text": "go"}]}}),
                    json!({"type": "message", "id": entry_id(), "parentId": id,
                        "timestamp": ts_now(), "message": {"role": "assistant",
                        "content": [{"type": "text", "text": answer}], "stopReason": "stop"}}),
                ];
                let bytes: String = lines.iter().map(|l| format!("{l}\n")).collect();
                return (bytes, id);
            }
        };
        let bytes: String = lines.iter().map(|l| format!("{l}\n")).collect();
        (bytes, format!("#{}", self.turns))
    }
}

/// A Pi-style entry id: 8 hex digits, unique within the run.
fn entry_id() -> String {
    let id = uuid();
    id[id.len() - 8..].to_owned()
}

const PROVIDERS: [&str; 3] = ["cursor", "copilot", "pi"];

/// Where each agent's root is (none exists when the daemon starts).
fn root_of(base: &Path, provider: &str) -> PathBuf {
    match provider {
        "cursor" => base.join("home/.cursor/projects"),
        "copilot" => base.join("home/.copilot/session-state"),
        _ => base.join("home/.pi/agent/sessions"),
    }
}

fn start() -> (Daemon, PathBuf) {
    let d = Daemon::tree();
    let base = d.dir.path().to_path_buf();
    let watch: Vec<String> = PROVIDERS
        .iter()
        .map(|p| format!("{p}={}", root_of(&base, p).display()))
        .collect();
    let mut args = vec!["--debug-sweep-interval", "200ms"];
    for w in &watch {
        args.extend(["--watch", w.as_str()]);
    }
    (d.start(&args), base)
}

#[test]
fn sessions_in_roots_created_after_start_are_seen() {
    let (mut d, base) = start();
    let mut turns = Vec::new();
    for p in PROVIDERS {
        // The root and the session's folders appear only now.
        let mut a = Agent::new(p, &root_of(&base, p));
        let (bytes, turn) = a.turn(&format!("{p} is done"));
        append(&a.path, (a.header() + &bytes).as_bytes());
        let ev = d.wait_for(p, |e| {
            e["event"] == "turn_completed" && e["provider"] == p && e["turn"] == turn.as_str()
        });
        assert_eq!(ev["message"], format!("{p} is done"));
        assert_eq!(ev["session"], a.session.as_str());
        assert!(ev["agent"].is_null());
        if p == "cursor" {
            assert!(ev["record_ts"].is_null(), "Cursor records carry no time");
        }
        turns.push((p, turn));
    }
    let events = d.stop();
    for (p, turn) in &turns {
        let n = events
            .iter()
            .filter(|e| {
                e["event"] == "turn_completed" && e["provider"] == *p && e["turn"] == turn.as_str()
            })
            .count();
        assert_eq!(n, 1, "{p}");
    }
}

#[test]
fn files_truncated_and_rewritten_alert_only_the_new_turn() {
    let (mut d, base) = start();
    for p in PROVIDERS {
        let mut a = Agent::new(p, &root_of(&base, p));
        let header = a.header();
        let (turn_a, id_a) = a.turn("answer A");
        append(&a.path, (header.clone() + &turn_a).as_bytes());
        d.wait_for(p, |e| {
            e["provider"] == p && is("turn_completed", id_a.clone())(e)
        });

        // Truncated to nothing, then rewritten with the old turn and a new one.
        fs::OpenOptions::new()
            .write(true)
            .open(&a.path)
            .unwrap()
            .set_len(0)
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let (turn_b, id_b) = a.turn("answer B");
        fs::write(&a.path, format!("{header}{turn_a}{turn_b}")).unwrap();
        let ev = d.wait_for(p, |e| {
            e["provider"] == p && is("turn_completed", id_b.clone())(e)
        });
        assert_eq!(ev["message"], "answer B");
        let events = d.events();
        let mine: Vec<Value> = events
            .into_iter()
            .filter(|e| e["provider"] == p && e["session"] == a.session.as_str())
            .collect();
        assert_eq!(count(&mine, "turn_completed", &id_a), 1, "{p}: A once");
        assert_eq!(count(&mine, "turn_completed", &id_b), 1, "{p}: B once");
    }
    d.stop();
}
