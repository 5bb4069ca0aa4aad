//! SGME L0 raw Markdown through `baton replay`, and through the live pipeline (feed +
//! reducer on the machine clock, as the daemon runs it). Fixtures: tests/fixtures/sgme,
//! written by hand from seed 002.

use crate::common;

use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::{Event, EventKind, ProviderKind};
use baton::reduce::Reducer;
use std::path::{Path, PathBuf};

const SESSION: &str = "sessions/0f8e2c1a-5b7d-4e3f-9a2b-1c3d5e7f9a0b.md";
const FID: &str = "0f8e2c1a-5b7d-4e3f-9a2b-1c3d5e7f9a0b";

fn raw(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sgme/raw")
        .join(rel)
}

fn replay(args: &[&str], paths: &[PathBuf]) -> Vec<String> {
    common::replay_summary("sgme", false, args, paths)
}

#[test]
fn fenced_heading_is_no_block_and_turns_end_by_next_prompt_or_quiet() {
    let got = replay(&[], &[raw(SESSION)]);
    let s = "20260803_191806_5b6c69";
    assert_eq!(
        got,
        vec![
            format!("turn_started {s} turn={FID}:1 line=12 rts=2026-08-03T11:18:06.000Z"),
            // Blocks: 1 user, 2 assistant (with the fenced `## … assistant` line inside),
            // 3 tool, 4 assistant, 5 user. The user heading ends turn 1 at once; the
            // message is the first body line of the last assistant block (line 35).
            format!(
                "turn_completed {s} turn={FID}:1 line=35 rts=2026-08-03T11:19:20.000Z \
                 evidence=next_prompt message=Headings are `## {{ISO time}} {{role}}`; the one \
                 inside the code fence above is not a block."
            ),
            format!("turn_started {s} turn={FID}:5 line=37 rts=2026-08-03T11:19:40.000Z"),
            format!(
                "turn_completed {s} turn={FID}:5 line=43 rts=2026-08-03T11:19:55.000Z \
                 evidence=quiet message=They start with `**tool**: {{name}}`."
            ),
        ]
    );
}

#[test]
fn a_gap_longer_than_settle_completes_the_assistant_block_first() {
    // With a 10 s quiet period the tool block (5 s after the assistant block) still
    // supersedes nothing, but the 20 s gap before the next user heading completes turn 1
    // by quiet rather than by the prompt.
    let got = replay(&["--settle", "10s"], &[raw(SESSION)]);
    assert!(
        got[1].starts_with(&format!(
            "turn_completed 20260803_191806_5b6c69 turn={FID}:1 line=35 rts=2026-08-03T11:19:20.000Z evidence=quiet"
        )),
        "{got:#?}"
    );
    assert_eq!(got.len(), 4);
}

#[test]
fn unknown_format_version_is_an_anomaly_and_the_file_is_still_followed() {
    let fid = "5d2c9b4e-7a1f-4c3b-8e6d-2f4a6b8c0d1e";
    let got = replay(&[], &[raw(&format!("sessions/{fid}.md"))]);
    let s = "20260803_200000_aa11bb";
    assert_eq!(
        got,
        vec![
            format!(
                "anomaly {s} turn=- line=8 rts=- reason=bad_frontmatter \
                 message=unknown format_version `2`"
            ),
            format!("turn_started {s} turn={fid}:1 line=10 rts=2026-08-03T12:00:00.000Z"),
            format!(
                "turn_completed {s} turn={fid}:1 line=16 rts=2026-08-03T12:00:10.000Z \
                 evidence=quiet message=Yes: its content may recover."
            ),
        ]
    );
}

#[test]
fn missing_front_matter_is_an_anomaly_and_the_file_name_stands_in() {
    let fid = "9b1d3f5a-2c4e-4a6b-9d8f-0e2a4c6e8a0c";
    let got = replay(&[], &[raw(&format!("sessions/{fid}.md"))]);
    assert_eq!(
        got,
        vec![
            format!(
                "anomaly {fid} turn=- line=1 rts=- reason=bad_frontmatter \
                 message=the file has no front matter"
            ),
            format!("turn_started {fid} turn={fid}:1 line=1 rts=2026-08-03T13:00:00.000Z"),
            format!(
                "turn_completed {fid} turn={fid}:1 line=7 rts=2026-08-03T13:00:04.000Z \
                 evidence=quiet message=Still answered."
            ),
        ]
    );
}

#[test]
fn uploads_and_external_files_have_no_turns_but_their_front_matter_is_checked() {
    let got = replay(&[], &[raw("uploads"), raw("external")]);
    assert_eq!(
        got,
        vec![
            "anomaly 7e9a1c3d-5f2b-4d6e-a8c0-4b6d8f0a2c4e turn=- line=6 rts=- \
             reason=bad_frontmatter message=session_key is missing; started_at is missing"
                .to_owned()
        ]
    );
}

#[test]
fn raw_root_selects_l0_files_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("raw");
    for sub in ["sessions", "archive/2026-05", "notes"] {
        std::fs::create_dir_all(root.join(sub)).expect("mkdir");
    }
    std::fs::copy(raw(SESSION), root.join(SESSION)).expect("copy");
    // Cold archives are zstd; other Markdown under raw/ is not L0.
    std::fs::write(root.join("archive/2026-05/x.md.zst"), b"\x28\xb5\x2f\xfd").expect("write");
    std::fs::write(
        root.join("archive/2026-05/y.md"),
        "# 2026-08-03T00:00:00Z user\n",
    )
    .expect("write");
    std::fs::write(root.join("notes/n.md"), "# 2026-08-03T00:00:00Z user\n").expect("write");
    std::fs::write(root.join("README.md"), "# 2026-08-03T00:00:00Z user\n").expect("write");
    let with_hint = replay(&["--provider", "sgme"], std::slice::from_ref(&root));
    let detected = replay(&[], &[root]);
    assert_eq!(with_hint.len(), 4, "{with_hint:#?}");
    assert_eq!(with_hint, detected);
}

fn apply(
    feed: &mut FileFeed,
    reducer: &mut Reducer,
    bytes: &[u8],
    now: Now,
    events: &mut Vec<Event>,
) {
    let mut obs = Vec::new();
    feed.feed(bytes, |src, o| obs.push((src.clone(), o)));
    for (src, o) in obs {
        reducer.apply(&src, o, now, events);
    }
}

/// The daemon's path: bytes arrive in appends, time is the machine's.
#[test]
fn live_append_completes_after_quiet_and_a_growing_file_keeps_it_pending() {
    let path = raw(SESSION);
    let bytes = std::fs::read(&path).expect("fixture");
    let text = String::from_utf8(bytes).expect("utf-8");
    // Up to and including the last assistant block's heading and first body line.
    let cut = text.find("They start").expect("marker");
    let (first, rest) = text.split_at(cut);
    let settle = 30_000;
    let mut feed = FileFeed::new(&path, ProviderKind::Sgme, 1 << 20);
    let mut reducer = Reducer::new(settle, 1024);
    let mut events: Vec<Event> = Vec::new();
    let at = |mono: u64| Now {
        mono,
        wall: 1_800_000_000_000 + i64::try_from(mono).unwrap_or(0),
    };

    apply(
        &mut feed,
        &mut reducer,
        first.as_bytes(),
        at(0),
        &mut events,
    );
    let kinds: Vec<EventKind> = events.iter().map(|e| e.event).collect();
    assert_eq!(
        kinds,
        vec![
            EventKind::TurnStarted,
            EventKind::TurnCompleted,
            EventKind::TurnStarted
        ]
    );
    // The answer's heading is in, its body not yet: nothing until the quiet period ends.
    reducer.tick(at(settle - 1), &mut events);
    assert_eq!(events.len(), 3);
    // The body arrives 20 s later: still the same block, and quiet restarts from it.
    apply(
        &mut feed,
        &mut reducer,
        rest.as_bytes(),
        at(20_000),
        &mut events,
    );
    reducer.tick(at(20_000 + settle - 1), &mut events);
    assert_eq!(events.len(), 3);
    reducer.tick(at(20_000 + settle), &mut events);
    assert_eq!(events.len(), 4);
    let done = &events[3];
    assert_eq!(done.event, EventKind::TurnCompleted);
    assert_eq!(done.turn.as_deref(), Some(format!("{FID}:5").as_str()));
    assert_eq!(done.evidence.as_deref(), Some("quiet"));
    assert_eq!(
        done.message.as_deref(),
        Some("They start with `**tool**: {name}`.")
    );
    // A new heading after that reopens nothing by itself; a user heading starts turn 7.
    apply(
        &mut feed,
        &mut reducer,
        b"\n## 2026-08-03T11:40:00Z user\n\n> next\n",
        at(100_000),
        &mut events,
    );
    assert_eq!(events.len(), 5);
    assert_eq!(events[4].event, EventKind::TurnStarted);
    assert_eq!(events[4].turn.as_deref(), Some(format!("{FID}:7").as_str()));
}
