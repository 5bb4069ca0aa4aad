//! Damaged transcripts: every bad line is a counted anomaly, and the records after it
//! still count. Never a panic, a stall or a lost later record.

#![allow(clippy::unwrap_used)]

use crate::common::{SETTLE_MS, claude, codex, kinds, lines, options, replay_bytes};
use baton::model::ProviderKind;
use proptest::prelude::*;

#[test]
fn nul_run_before_a_record_is_stripped_and_the_record_counts() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = lines(&[claude::prompt("u1", 0, "hi")]);
    bytes.extend(std::iter::repeat_n(0u8, 4096));
    bytes.extend(lines(&[claude::text(
        "a1",
        2,
        "m",
        "Done.",
        Some("end_turn"),
    )]));
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &bytes,
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "anomaly", "turn_completed"]);
    assert_eq!(evs[1].reason.as_deref(), Some("nul_bytes"));
    assert_eq!(evs[2].line, Some(2));
}

#[test]
fn invalid_utf8_inside_a_string_is_repaired_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mut done = claude::text("a1", 2, "m", "caf@ ok", Some("end_turn")).into_bytes();
    let at = done.iter().position(|b| *b == b'@').unwrap();
    done[at] = 0xE9; // Latin-1 é: not UTF-8.
    let mut bytes = lines(&[claude::prompt("u1", 0, "hi")]);
    bytes.extend(done);
    bytes.push(b'\n');
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &bytes,
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "anomaly", "turn_completed"]);
    assert_eq!(evs[1].reason.as_deref(), Some("invalid_utf8"));
    assert_eq!(evs[2].message.as_deref(), Some("caf\u{fffd} ok"));
}

#[test]
fn a_record_spliced_onto_a_torn_write_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = lines(&[codex::meta(0), codex::started(1, "t1")]);
    // A writer died mid-line and the next write landed on the same line.
    bytes.extend_from_slice(b"{\"timestamp\":\"2026-03-01T10:00:02.000Z\",\"type\":\"event_m");
    bytes.extend(lines(&[codex::complete(3, "t1", "ok")]));
    let evs = replay_bytes(
        dir.path(),
        "rollout.jsonl",
        ProviderKind::Codex,
        &bytes,
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started", "anomaly", "turn_completed"]);
    assert_eq!(evs[1].reason.as_deref(), Some("spliced_line"));
    assert_eq!(evs[2].line, Some(3));
}

#[test]
fn a_file_ending_in_a_partial_line_reports_nothing_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = lines(&[claude::prompt("u1", 0, "hi")]);
    bytes.extend_from_slice(claude::text("a1", 2, "m", "Done.", Some("end_turn")).as_bytes());
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &bytes,
        &options(SETTLE_MS),
    );
    assert_eq!(kinds(&evs), ["turn_started"]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever garbage precedes it, a well-formed completion is still reported, and
    /// every garbage line is at most one anomaly.
    #[test]
    fn garbage_never_hides_a_later_completion(
        garbage in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..8),
        provider_is_claude in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (provider, head, tail) = if provider_is_claude {
            (ProviderKind::Claude, lines(&[claude::prompt("u1", 0, "hi")]), lines(&[claude::text("a1", 59, "m", "Done.", Some("end_turn"))]))
        } else {
            (ProviderKind::Codex, lines(&[codex::meta(0), codex::started(1, "t1")]), lines(&[codex::complete(59, "t1", "ok")]))
        };
        let mut bytes = head;
        let mut n_garbage = 0;
        for g in &garbage {
            bytes.extend(g.iter().map(|b| if *b == b'\n' { b' ' } else { *b }));
            bytes.push(b'\n');
            n_garbage += 1;
        }
        bytes.extend(tail);
        let evs = replay_bytes(dir.path(), "f.jsonl", provider, &bytes, &options(SETTLE_MS));
        let done: Vec<_> = evs.iter().filter(|e| e.event.as_str() == "turn_completed").collect();
        prop_assert!(!done.is_empty(), "{:?}", kinds(&evs));
        let last = done.last().unwrap();
        prop_assert_eq!(last.line, Some(bytes.iter().filter(|b| **b == b'\n').count() as u64));
        let anomalies = evs.iter().filter(|e| e.event.as_str() == "anomaly").count();
        prop_assert!(anomalies <= 2 * n_garbage);
    }
}

#[test]
fn oversized_lines_keep_the_clock_and_scope_from_their_ends() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(SETTLE_MS);
    opts.max_line = 2048;
    // A huge sidechain record in the main file must not supersede the main candidate...
    let side = claude::sidechain_text("s9", None, 30, &"z".repeat(10_000), None);
    // ...while a huge main-conversation tool result 100 s after the answer does, and its
    // timestamp (read from the line's tail) moves the clock.
    let records = [
        claude::prompt("u1", 0, "go"),
        claude::text("a1", 10, "m", "Answer?", None),
        side,
    ];
    let evs = replay_bytes(
        dir.path(),
        "s.jsonl",
        ProviderKind::Claude,
        &lines(&records),
        &opts,
    );
    assert_eq!(kinds(&evs), ["turn_started", "anomaly", "turn_completed"]);
    assert_eq!(evs[2].line, Some(2));
    assert_eq!(evs[2].evidence.as_deref(), Some("quiet"));

    let main = claude::tool_result("r1", 110, &"z".repeat(10_000));
    let records = [
        claude::prompt("u1", 0, "go"),
        claude::text("a1", 10, "m", "Answer?", None),
        main,
        claude::text("a2", 115, "m2", "Real answer.", Some("end_turn")),
    ];
    let evs = replay_bytes(
        dir.path(),
        "t.jsonl",
        ProviderKind::Claude,
        &lines(&records),
        &opts,
    );
    // The quiet period ran out (10 s + 90 s < 110 s) before the big line: the timestamp
    // from its tail fires the first candidate, then the big line reopens the turn and
    // takes the quiet completion back.
    assert_eq!(
        kinds(&evs),
        [
            "turn_started",
            "turn_completed",
            "anomaly",
            "turn_resumed",
            "turn_completed"
        ]
    );
    assert_eq!(evs[1].line, Some(2));
    assert_eq!(evs[3].line, Some(3));
    assert_eq!(evs[3].supersedes.as_deref(), Some(evs[1].id.as_str()));
    assert_eq!(evs[4].line, Some(4));
}
