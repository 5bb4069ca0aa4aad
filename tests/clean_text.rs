//! Transcript text reaches people only through the one sanitizer: the event `message`
//! (what notifications, webhooks and hooks show) and `scan` hold no control character,
//! escape-sequence remnant, bidi control or invisible character.

#![allow(clippy::unwrap_used)]

use crate::common::{SETTLE_MS, claude, lines, options, replay_bytes};
use baton::model::{EventKind, ProviderKind};
use std::process::Command;

/// Each piece hides or rewrites what a reader sees: 8-bit CSI with its parameters, 7-bit
/// CSI, DCS and OSC strings, a charset designation, a right-to-left override, zero-width
/// and bidi isolate characters, an Arabic letter mark, a byte order mark.
const EVIL: &str = "ok\u{9b}31m \u{1b}[2Jdone\u{1b}P1$r0m\u{1b}\\ \u{9d}0;pwned\u{7}\u{1b}(Bsafe \
                    \u{202e}fdp.exe\u{202c} a\u{200b}b\u{200d}c \u{2066}x\u{2069}\u{061c}\u{feff}\u{200e}!";
const SHOWN: &str = "ok done safe fdp.exe abc x!";

fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{061c}'
            | '\u{200b}'..='\u{200f}' | '\u{2060}' | '\u{feff}')
}

fn transcript() -> Vec<u8> {
    lines(&[
        claude::prompt("u1", 0, "hi"),
        claude::text("a1", 2, "m", EVIL, Some("end_turn")),
    ])
}

#[test]
fn event_message_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &transcript(),
        &options(SETTLE_MS),
    );
    let done = evs
        .iter()
        .find(|e| e.event == EventKind::TurnCompleted)
        .unwrap();
    assert_eq!(done.message.as_deref(), Some(SHOWN));
    let title = baton::naming::title(done);
    let body = baton::naming::plain_message(done);
    for text in [&title, &body] {
        assert!(!text.chars().any(hidden), "{text:?}");
    }
}

#[test]
fn scan_shows_the_clean_text() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.jsonl"), transcript()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["scan", "--all"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.chars().any(|c| c != '\n' && hidden(c)), "{text:?}");
    assert!(text.contains("ok done safe"), "{text:?}");
}

/// A parse error quotes what it choked on: an anomaly's message is capped and cleaned
/// like any other (found by fuzzing: a 1,000-character quote, newlines and all).
#[test]
fn anomaly_message_quoting_the_transcript_is_capped_and_clean() {
    let dir = tempfile::tempdir().unwrap();
    let quoted = format!("{}{EVIL}\n", "z".repeat(1000));
    let mut bytes = lines(&[claude::prompt("u1", 0, "hi")]);
    bytes.extend(serde_json::to_string(&quoted).unwrap().into_bytes());
    bytes.push(b'\n');
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &bytes,
        &options(SETTLE_MS),
    );
    let bad = evs
        .iter()
        .find(|e| e.reason.as_deref() == Some("malformed_line"))
        .unwrap();
    let m = bad.message.as_deref().unwrap();
    assert!(
        m.starts_with("not a JSON record: invalid type: string"),
        "{m}"
    );
    assert!(m.chars().count() <= baton::model::MESSAGE_MAX_CHARS, "{m}");
    assert!(!m.chars().any(hidden), "{m:?}");
}
