//! Tail-first equivalence: for every corpus file and every file of a generated tree, cut
//! after a line (every line of small files, many of big ones), the state read from the
//! file's last turns must equal the state a read of every byte gives: each session's
//! whole reducer state (state, turn, lines, times, message, evidence, pending
//! candidate) and the number of the last line.

#![allow(clippy::unwrap_used)]

use crate::common;

use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::ProviderKind;
use baton::provider::ObsKind;
use baton::reduce::{Reducer, Src};
use baton::replay;
use baton::tail_first::{self, Plan};
use baton::watch::{self, Found, Root};
use std::collections::BTreeSet;
use std::io::Cursor;
use std::path::Path;

const MAX_LINE: usize = baton::tail::DEFAULT_MAX_LINE_BYTES;
/// Past every settle deadline of any record, so saved candidates compare by content.
const LATER: Now = Now {
    mono: u64::MAX / 4,
    wall: i64::MAX / 4,
};

/// Feeds `bytes` (which follow the feed's position) through the reducer as replay does
/// (virtual clock: the largest record time so far in this read).
fn feed(feed: &mut FileFeed, reducer: &mut Reducer, clock: &mut i64, bytes: &[u8]) -> Vec<u64> {
    let mut events = Vec::new();
    let mut starts = Vec::new();
    feed.feed(bytes, |src: &Src, obs| {
        if let Some(t) = obs.record_ts {
            *clock = (*clock).max(t);
        }
        if matches!(obs.kind, ObsKind::TurnStart { .. }) {
            starts.push(src.line);
        }
        let now = Now::virtual_at(*clock);
        reducer.tick(now, &mut events);
        reducer.apply(src, obs, now, &mut events);
    });
    starts
}

fn state(reducer: &Reducer, path: &str, last_line: u64) -> String {
    format!(
        "last_line={last_line} {}",
        serde_json::to_string(&reducer.save_path(path, LATER)).unwrap()
    )
}

#[derive(Default)]
struct Tally {
    cuts: u64,
    tail: u64,
    full: u64,
}

/// Checks one file; returns the mismatches.
fn check_file(f: &Found, tally: &mut Tally) -> Vec<String> {
    let data = std::fs::read(&f.path).unwrap();
    check_bytes(f, &data, false, tally)
}

/// Checks `data` as the content of `f` at cuts after its lines (all of them when
/// `every_line`).
fn check_bytes(f: &Found, data: &[u8], every_line: bool, tally: &mut Tally) -> Vec<String> {
    let data = data.to_vec();
    let mut full = FileFeed::new(&f.path, f.provider, MAX_LINE);
    if !full.is_conversation() {
        return Vec::new();
    }
    let path = full.path.clone();
    // Line ends (offset just past each newline).
    let ends: Vec<usize> = memchr::memchr_iter(b'\n', &data).map(|i| i + 1).collect();
    let n = ends.len();
    // First pass: where turns start, to cut around them as well.
    let mut probe = FileFeed::new(&f.path, f.provider, MAX_LINE);
    let mut r = Reducer::new(90_000, 1024);
    let turn_lines = feed(&mut probe, &mut r, &mut 0, &data);
    let mut cuts: BTreeSet<usize> = BTreeSet::new();
    // Every line of small files; about 2 MB of tail reading per big one (debug builds).
    let every = if every_line {
        1
    } else {
        (data.len() / 80_000).clamp(1, n.max(1))
    };
    cuts.extend((1..=n).step_by(every));
    cuts.extend(n.saturating_sub(8)..=n);
    for t in turn_lines.iter().rev().take(40) {
        let t = usize::try_from(*t).unwrap();
        cuts.extend([t - 1, t, t + 1, t + 2]);
    }
    cuts.retain(|c| (1..=n).contains(c));

    let mut wrong = Vec::new();
    let mut reducer = Reducer::new(90_000, 1024);
    let mut clock = 0;
    let mut prev = 0;
    for &cut in &cuts {
        feed(
            &mut full,
            &mut reducer,
            &mut clock,
            &data[prev..ends[cut - 1]],
        );
        prev = ends[cut - 1];
        let want = state(&reducer, &path, full.reader().line_no() - 1);
        let bytes = &data[..ends[cut - 1]];
        tally.cuts += 1;
        match tail_first::plan(&mut Cursor::new(bytes), f.provider, &f.path).unwrap() {
            Plan::Full(_) => tally.full += 1,
            Plan::Tail { start, tail: kept } => {
                tally.tail += 1;
                let line_no = start.line_no;
                let off = usize::try_from(start.offset).unwrap();
                if let Some(kept) = kept {
                    assert_eq!(
                        kept.bytes(),
                        &bytes[off..],
                        "the kept tail is the file's end"
                    );
                }
                let mut tail = start.feed(&f.path, f.provider, MAX_LINE);
                let mut r = Reducer::new(90_000, 1024);
                feed(&mut tail, &mut r, &mut 0, &bytes[off..]);
                let got = state(&r, &path, tail.reader().line_no() - 1);
                if got != want {
                    wrong.push(format!(
                        "{} cut after line {cut} (restart at line {line_no}):\n  full: {want}\n  tail: {got}",
                        f.path.display()
                    ));
                }
            }
        }
    }
    wrong
}

fn check_tree(root: &Path, provider: Option<ProviderKind>) -> Tally {
    let files = watch::find(&Root {
        path: root.to_path_buf(),
        provider,
    });
    assert!(!files.is_empty(), "no files under {}", root.display());
    let mut tally = Tally::default();
    let mut wrong = Vec::new();
    for f in &files {
        wrong.extend(check_file(f, &mut tally));
    }
    assert!(
        wrong.is_empty(),
        "{} cuts disagree:\n{}",
        wrong.len(),
        wrong.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
    // A scan reads the same states either way.
    let opts = common::options(common::SETTLE_MS);
    let (tail, stats) = replay::scan_with(&files, &opts, true).unwrap();
    let (whole, _) = replay::scan_with(&files, &opts, false).unwrap();
    assert_eq!(tail, whole);
    println!("{}: {}", root.display(), stats.summary());
    tally
}

#[test]
fn corpus_tail_first_state_equals_full_read_at_every_cut() {
    let Some(corpus) = common::corpus() else {
        return;
    };
    let t = check_tree(&corpus, None);
    println!("{} cuts: {} tail-first, {} whole", t.cuts, t.tail, t.full);
    // The test means something only if most cuts take the tail-first path.
    assert!(
        t.tail * 4 > t.cuts,
        "{} of {} cuts tail-first",
        t.tail,
        t.cuts
    );
}

/// Part E's Copilot and Oh My Pi fixtures (always read whole: neither provider has
/// restart points) agree with a full read at every cut.
#[test]
fn part_e_copilot_and_omp_fixtures_tail_first_state_equals_full_read_at_every_cut() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/part-e");
    let files: Vec<Found> = watch::find(&Root {
        path: root,
        provider: None,
    })
    .into_iter()
    .filter(|f| {
        f.path.file_name().is_some_and(|n| {
            let n = n.to_string_lossy();
            n.starts_with("synthetic-copilot-") || n.starts_with("synthetic-omp-")
        })
    })
    .collect();
    assert_eq!(files.len(), 5);
    let mut tally = Tally::default();
    let mut wrong = Vec::new();
    for f in &files {
        wrong.extend(check_file(f, &mut tally));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(tally.cuts > 80, "cuts: {}", tally.cuts);
}

#[test]
fn generated_tail_first_state_equals_full_read_at_every_cut() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tree");
    let args = [
        "--mib",
        "4",
        "--sessions",
        "24",
        "--seed",
        "12",
        "--huge-every",
        "0",
    ];
    if common::generate(&out, &args).is_none() {
        return;
    }
    let mut t = check_tree(&out.join("claude"), Some(ProviderKind::Claude));
    let c = check_tree(&out.join("codex"), Some(ProviderKind::Codex));
    t.cuts += c.cuts;
    t.tail += c.tail;
    t.full += c.full;
    println!("{} cuts: {} tail-first, {} whole", t.cuts, t.tail, t.full);
    assert!(
        t.tail * 4 > t.cuts,
        "{} of {} cuts tail-first",
        t.tail,
        t.cuts
    );
}

/// The daemon's first history read starts files at their restart points too: what
/// `status` shows right after `daemon_ready` agrees with the generator's manifest.
#[test]
fn daemon_first_start_agrees_with_the_manifest() {
    let d = common::Daemon::tree();
    let args = [
        "--mib",
        "3",
        "--sessions",
        "16",
        "--seed",
        "21",
        "--huge-every",
        "0",
    ];
    let Some(manifest) = common::generate(d.dir.path(), &args) else {
        return;
    };
    // Where the read starts is the question here, not liveness: the generated sessions
    // that end mid-turn have no writer, and the history read judges liveness since
    // issue 29 (tests/daemon_corpus.rs holds that `status` then equals `scan`).
    let d = d.start(&["--liveness-after", "1000000h"]);
    let out = d.baton().args(["status", "--json"]).output().unwrap();
    assert!(out.status.success());
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let log = std::fs::read_to_string(&d.log).unwrap_or_default();
    let mut wrong = Vec::new();
    for s in manifest["sessions"].as_array().unwrap() {
        let path = d.dir.path().join(s["path"].as_str().unwrap());
        let row = rows
            .iter()
            .find(|r| r["path"] == path.display().to_string() && r["agent"].is_null());
        let want = match s["state"].as_str().unwrap() {
            "waiting" => "completed",
            other => other,
        };
        match row {
            Some(r) if r["state"] == want && r["turn"] == s["turn"] && r["line"] == s["line"] => {}
            _ => wrong.push(format!("{s} -> {row:?}")),
        }
    }
    assert!(wrong.is_empty(), "{}\n{log}", wrong.join("\n"));
    // Most files took the tail-first path (the rest say why in the log).
    let tail = log.matches("History read from its last turn").count();
    let whole = log.matches("History read whole").count();
    assert!(tail > whole, "{tail} files read tail-first, {whole} whole");
    d.stop();
}

/// Records in any order a session can produce (and some it should not), for the
/// property test: each case names a record kind; ids and times come from its position.
mod synth {
    use super::common::{claude, codex};
    use serde_json::json;

    fn ts(sec: u32) -> String {
        format!(
            "2026-03-01T{:02}:{:02}:{:02}.000Z",
            sec / 3600,
            sec / 60 % 60,
            sec % 60
        )
    }

    pub fn claude_line(kind: u8, i: usize, sec: u32, prev: &str) -> (String, String) {
        let u = format!("{i:08x}-0000-4000-8000-000000000000");
        let line = match kind % 16 {
            0 | 1 => claude::prompt(&u, 0, &format!("prompt {i}")),
            2 => claude::text(&u, 0, &format!("m{i}"), "done", Some("end_turn")),
            3 => claude::text(&u, 0, &format!("m{i}"), "maybe done", None),
            4 => claude::tool_use(&u, 0, &format!("m{i}"), &format!("t{i}"), "Bash"),
            5 => claude::tool_result(&u, 0, &format!("t{}", i.saturating_sub(1))),
            6 => claude::tool_use(&u, 0, &format!("m{i}"), &format!("t{i}"), "AskUserQuestion"),
            7 => claude::api_error(&u, 0, "API Error: overloaded"),
            8 => json!({"type":"user","uuid":u,"parentUuid":prev,"sessionId":claude::SESSION,"timestamp":"","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]}}).to_string(),
            9 => json!({"type":"user","uuid":u,"parentUuid":prev,"sessionId":claude::SESSION,"isMeta":true,"timestamp":"","message":{"role":"user","content":"<local-command-caveat>Caveat</local-command-caveat>"}}).to_string(),
            10 => json!({"type":"user","uuid":u,"parentUuid":prev,"sessionId":claude::SESSION,"timestamp":"","message":{"role":"user","content":"<command-name>/model</command-name>"}}).to_string(),
            // Blocks stamped with the stop of a call (a file that stamps every block, so a
            // later text without a stop is no answer), and texts whose version tells.
            12 => super::claude_block(&u, 0, json!({"type":"thinking","thinking":"hmm","signature":"x"}), Some("tool_use"), None),
            13 => super::claude_block(&u, 0, json!({"type":"text","text":"let me look"}), Some("tool_use"), None),
            14 => super::claude_block(&u, 0, json!({"type":"text","text":"still going"}), None, Some("2.1.239")),
            15 => super::claude_block(&u, 0, json!({"type":"text","text":"maybe done"}), None, Some("2.1.200")),
            _ => json!({"type":"system","subtype":"turn_duration","uuid":u,"sessionId":claude::SESSION,"timestamp":"","durationMs":5}).to_string(),
        };
        // The builders' own times are replaced: these go forward by the case's gaps.
        let mut v: serde_json::Value = serde_json::from_str(&line).unwrap();
        v["timestamp"] = json!(ts(sec));
        v["parentUuid"] = json!(prev);
        (v.to_string(), u)
    }

    pub fn codex_line(kind: u8, i: usize, sec: u32, turn: &mut String) -> String {
        let line = match kind % 14 {
            0 => {
                *turn = format!("turn-{i}");
                codex::started(0, turn)
            }
            1 => codex::complete(0, turn, "all done"),
            2 => codex::user(0, "do it"),
            3 => codex::answer(0, "here it is"),
            4 => codex::call(0, &format!("c{i}")),
            5 => codex::output(0, &format!("c{}", i.saturating_sub(1))),
            6 => codex::event(
                0,
                json!({"type":"turn_aborted","turn_id":turn,"reason":"interrupted"}),
            ),
            7 => codex::event(0, json!({"type":"error","message":"stream disconnected"})),
            8 => codex::event(
                0,
                json!({"type":"task_complete","turn_id":"turn-stale","last_agent_message":null}),
            ),
            // The approval policy is the projector's context: a call that asks to leave
            // the sandbox waits for the person only under a policy that asks.
            10 => codex::context(0, turn, "on-request"),
            11 => codex::context(0, turn, "never"),
            12 => codex::escalating_call(0, &format!("c{i}"), "needs the network"),
            13 => codex::event(
                0,
                json!({"type":"task_complete","turn_id":turn,"last_agent_message":null}),
            ),
            _ => codex::event(0, json!({"type":"agent_reasoning","text":"hmm"})),
        };
        let mut v: serde_json::Value = serde_json::from_str(&line).unwrap();
        v["timestamp"] = json!(ts(sec));
        v.to_string()
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Random Claude and Codex record sequences: tail-first equals a whole read after
    /// every line.
    #[test]
    fn synthesized_transcripts_agree_at_every_cut(
        kinds in proptest::collection::vec((0u8..16, 1u32..200), 1..60),
        codex_kinds in proptest::collection::vec((0u8..14, 1u32..200), 1..60),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut tally = Tally::default();
        let mut wrong = Vec::new();

        let path = dir.path().join(format!("{}.jsonl", common::claude::SESSION));
        let (mut sec, mut prev, mut lines) = (0, String::new(), Vec::new());
        for (i, (k, gap)) in kinds.iter().enumerate() {
            sec += gap;
            let (line, u) = synth::claude_line(*k, i, sec, &prev);
            prev = u;
            lines.push(line);
        }
        let f = Found { path, provider: ProviderKind::Claude };
        wrong.extend(check_bytes(&f, &common::lines(&lines), true, &mut tally));

        let path = dir.path().join(format!("rollout-2026-03-01T10-00-00-{}.jsonl", common::codex::SESSION));
        let (mut sec, mut turn) = (0, "turn-0".to_owned());
        let mut lines = vec![common::codex::meta(0)];
        for (i, (k, gap)) in codex_kinds.iter().enumerate() {
            sec += gap;
            lines.push(synth::codex_line(*k, i, sec, &mut turn));
        }
        let f = Found { path, provider: ProviderKind::Codex };
        wrong.extend(check_bytes(&f, &common::lines(&lines), true, &mut tally));
        proptest::prop_assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}

/// The turns of Part E (peer messages, idle notifications and bash input the model
/// answers, `turnOrigin`): a read from a restart point finds the same turn starts as a
/// read of every byte, at every cut. Each fixture is copied under its session's id, the
/// name Claude Code gives a session file (other names are always read whole).
#[test]
fn part_e_claude_fixtures_tail_first_state_equals_full_read_at_every_cut() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/part-e");
    let dir = tempfile::tempdir().unwrap();
    let mut tally = Tally::default();
    let mut wrong = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        if !path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("synthetic-claude-"))
        {
            continue;
        }
        let data = std::fs::read(&path).unwrap();
        let first: serde_json::Value =
            serde_json::from_slice(data.split(|b| *b == b'\n').next().unwrap()).unwrap();
        let session = first["sessionId"].as_str().unwrap();
        let f = Found {
            path: dir.path().join(format!("{session}.jsonl")),
            provider: ProviderKind::Claude,
        };
        std::fs::write(&f.path, &data).unwrap();
        wrong.extend(check_bytes(&f, &data, true, &mut tally));
        files += 1;
    }
    assert_eq!(files, 5);
    assert!(
        wrong.is_empty(),
        "{} cuts disagree:\n{}",
        wrong.len(),
        wrong.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
    println!(
        "{} cuts: {} tail-first, {} whole",
        tally.cuts, tally.tail, tally.full
    );
    // Files with teammates or background commands are read whole (a launch before the
    // restart point is context), and so are files with one human turn: the rest must
    // take the tail-first path often enough to mean something.
    assert!(
        tally.tail >= 20,
        "{} of {} cuts tail-first",
        tally.tail,
        tally.cuts
    );
}

/// Codex's approval policy comes from the `turn_context` after each turn start: a read
/// that jumps from the turn start to the answer still knows it, so a call after the answer
/// that asks to leave the sandbox waits for the person, as a whole read says. So too when
/// the `turn_context` holds invalid UTF-8 (the projector mends it and reads it).
#[test]
fn a_jump_past_the_turn_context_keeps_its_approval_policy() {
    for mangled in [false, true] {
        jump_past_the_turn_context(mangled);
    }
}

fn jump_past_the_turn_context(mangled: bool) {
    use common::codex;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!(
        "rollout-2026-03-01T10-00-00-{}.jsonl",
        codex::SESSION
    ));
    let mut lines = vec![codex::meta(0)];
    for (n, turn) in ["turn-1", "turn-2"].iter().enumerate() {
        let s = n as u32 * 20;
        let context = codex::context(s + 2, turn, "on-request");
        lines.extend([
            codex::started(s + 1, turn),
            // A placeholder byte in `cwd`, made invalid UTF-8 below.
            if mangled {
                context.replace("\"/w\"", "\"/w\u{1}\"")
            } else {
                context
            },
            codex::user(s + 3, "deploy it"),
            codex::call(s + 4, &format!("c{n}")),
            codex::output(s + 5, &format!("c{n}")),
            codex::answer(s + 6, "I will run the deploy script."),
            codex::escalating_call(s + 7, &format!("e{n}"), "Deploy needs the network"),
        ]);
    }
    let mut data = common::lines(&lines);
    for b in data.iter_mut().filter(|b| **b == 1) {
        *b = 0xff;
    }
    assert_eq!(std::str::from_utf8(&data).is_err(), mangled);
    let plan = tail_first::plan(&mut Cursor::new(&data), ProviderKind::Codex, &path).unwrap();
    let Plan::Tail { start, .. } = plan else {
        panic!("read whole: {plan:?}");
    };
    assert!(
        start.jump.is_some(),
        "the read jumps from the turn start to the answer"
    );
    assert!(start.context.is_some(), "shown the context it skips");
    let f = Found {
        path,
        provider: ProviderKind::Codex,
    };
    let wrong = check_bytes(&f, &data, true, &mut Tally::default());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A call that asks to leave the sandbox in a turn with no `turn_context` of its own
/// takes its policy from before the restart point: a file with a `turn_context` there
/// is read whole; one with none anywhere is still read from its last turn.
#[test]
fn an_escalation_with_its_policy_before_the_restart_point_reads_the_file_whole() {
    use common::codex;
    let path =
        Path::new("/s/rollout-2026-03-01T10-00-00-019c0000-0000-7000-8000-000000000001.jsonl");
    for (policy, whole) in [(true, true), (false, false)] {
        let mut lines = vec![codex::meta(0)];
        if policy {
            lines.push(codex::context(1, "turn-0", "on-request"));
        }
        lines.extend([
            codex::started(2, "turn-1"),
            codex::answer(3, "first"),
            codex::complete(4, "turn-1", "first"),
            codex::started(5, "turn-2"),
            codex::escalating_call(6, "e1", "Deploy needs the network"),
        ]);
        let data = common::lines(&lines);
        let plan = tail_first::plan(&mut Cursor::new(&data), ProviderKind::Codex, path).unwrap();
        assert_eq!(
            plan == Plan::Full("context_before_restart"),
            whole,
            "policy before the restart point: {policy}; {plan:?}"
        );
        let f = Found {
            path: path.to_owned(),
            provider: ProviderKind::Codex,
        };
        let wrong = check_bytes(&f, &data, true, &mut Tally::default());
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}

/// A Claude Code assistant record of one block (`block`), stamped with `stop`, written
/// by `version` (none: no field).
fn claude_block(
    uuid: &str,
    sec: u32,
    block: serde_json::Value,
    stop: Option<&str>,
    version: Option<&str>,
) -> String {
    let mut r = serde_json::json!({"type":"assistant","uuid":uuid,"sessionId":common::claude::SESSION,
        "isSidechain":false,"timestamp":format!("2026-03-01T10:{:02}:{:02}.000Z", sec / 60, sec % 60),
        "message":{"id":format!("msg_{uuid}"),"model":"claude-opus-4-7","role":"assistant",
        "content":[block],"stop_reason":stop}});
    if let Some(v) = version {
        r["version"] = v.into();
    }
    r.to_string()
}

/// Two Claude turns; the second is a tool round whose thinking block is stamped with the
/// call's stop (`stamp_first`: the first turn's tool round instead), then (with `ask`) a
/// question to the person and its answer, and the file ends in a text block without a
/// stop (the response still streams).
fn claude_stamped(version: Option<&str>, stamp_first: bool, ask: bool) -> Vec<u8> {
    use common::claude;
    use serde_json::json;
    let thinking = json!({"type":"thinking","thinking":"hmm","signature":"x"});
    let call = |id: &str| json!({"type":"tool_use","id":id,"name":"Bash","input":{"command":"ls"}});
    let mut lines = vec![claude::prompt("u1", 0, "first task")];
    if stamp_first {
        lines.extend([
            claude_block("a0", 1, thinking.clone(), Some("tool_use"), version),
            claude_block("a01", 2, call("t0"), Some("tool_use"), version),
            claude::tool_result("r0", 3, "t0"),
        ]);
    }
    lines.extend([
        claude_block(
            "a1",
            4,
            json!({"type":"text","text":"done with first"}),
            Some("end_turn"),
            version,
        ),
        claude::prompt("u2", 60, "second task"),
        claude_block(
            "a2",
            61,
            thinking,
            (!stamp_first).then_some("tool_use"),
            version,
        ),
        claude_block("a3", 62, call("t1"), Some("tool_use"), version),
        claude::tool_result("r1", 63, "t1"),
    ]);
    if ask {
        let question = json!({"type":"tool_use","id":"q1","name":"AskUserQuestion",
            "input":{"questions":[{"question":"Which test suite?"}]}});
        lines.extend([
            claude_block("aq", 63, question, Some("tool_use"), version),
            claude::tool_result("rq", 64, "q1"),
        ]);
    }
    lines.extend([claude_block(
        "a4",
        64,
        json!({"type":"text","text":"Now I will look at the tests"}),
        None,
        version,
    )]);
    common::lines(&lines)
}

fn claude_found(dir: &Path) -> Found {
    Found {
        path: dir.join(format!("{}.jsonl", common::claude::SESSION)),
        provider: ProviderKind::Claude,
    }
}

/// A file that stamps every block leaves a text without a stop mid-response, not an
/// answer. Such a text is never a place to jump to (a fresh read would take it for the
/// answer); a read that jumps from the last prompt to a question after the stamped block
/// is shown the block it skips, and reads the text after the question as a whole read
/// does; so too when the stamped block holds invalid UTF-8 (the projector mends it).
#[test]
fn a_jump_past_a_stamped_block_keeps_the_text_after_it_unanswered() {
    let dir = tempfile::tempdir().unwrap();
    let f = claude_found(dir.path());
    for (ask, mangled) in [(false, false), (true, false), (true, true)] {
        let mut data = claude_stamped(None, false, ask);
        if mangled {
            // The stamped thinking block's model gets a byte that is no UTF-8.
            let block = memchr::memmem::find(&data, b"\"hmm\"").unwrap();
            let at = block + memchr::memmem::find(&data[block..], b"opus-4-7").unwrap();
            data[at + 6] = 0xff;
        }
        let plan =
            tail_first::plan(&mut Cursor::new(&data), ProviderKind::Claude, &f.path).unwrap();
        let Plan::Tail { start, .. } = plan else {
            panic!("mangled {mangled}: read whole: {plan:?}");
        };
        assert_eq!(start.jump.is_some(), ask, "jumps only to the question");
        assert_eq!(
            start.context.is_some(),
            ask,
            "shown the stamped block it skips"
        );
        let wrong = check_bytes(&f, &data, true, &mut Tally::default());
        assert!(
            wrong.is_empty(),
            "ask {ask}, mangled {mangled}: {}",
            wrong.join("\n")
        );
    }
}

/// A stamped block before the restart point: records that carry a version that stamps
/// every block tell so themselves and are read from the last turn; records without a
/// version make the file read whole; the versions before (2.1.3x writes no stops) are
/// read from the last turn as well. Each way, the state is a whole read's.
#[test]
fn a_stamped_block_before_the_restart_point_is_known_by_version_or_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let f = claude_found(dir.path());
    for (version, whole) in [
        (None, true),
        (Some("2.1.239"), false),
        (Some("2.1.39"), false),
    ] {
        let data = claude_stamped(version, true, false);
        let plan =
            tail_first::plan(&mut Cursor::new(&data), ProviderKind::Claude, &f.path).unwrap();
        assert_eq!(
            plan == Plan::Full("context_before_restart"),
            whole,
            "version {version:?}: {plan:?}"
        );
        let wrong = check_bytes(&f, &data, true, &mut Tally::default());
        assert!(
            wrong.is_empty(),
            "version {version:?}: {}",
            wrong.join("\n")
        );
    }
}

/// A Claude transcript of `turns` prompt-and-answer turns whose first answer says
/// `said`, after `pad` bytes of padding (so a test can place it at a chunk boundary).
fn claude_turns(turns: usize, said: &str, pad: usize) -> Vec<u8> {
    use common::claude;
    let mut lines = Vec::new();
    for t in 0..turns {
        let (p, a) = (
            format!("{:08x}-0000-4000-8000-00000000000a", t),
            format!("{:08x}-0000-4000-8000-00000000000b", t),
        );
        lines.push(claude::prompt(&p, 0, &format!("prompt {t}")));
        let text = if t == 0 {
            format!("{}{said}", "x".repeat(pad))
        } else {
            // Long answers: the first answer's bytes end up far before the last turn.
            "y".repeat(4000)
        };
        lines.push(claude::text(
            &a,
            1,
            &format!("m{t}"),
            &text,
            Some("end_turn"),
        ));
    }
    common::lines(&lines)
}

fn claude_plan(data: &[u8]) -> Plan {
    let path = std::path::PathBuf::from(format!("/p/{}.jsonl", common::claude::SESSION));
    tail_first::plan(&mut Cursor::new(data), ProviderKind::Claude, &path).unwrap()
}

/// Three background launch needles are found by one search for "background": a mere
/// mention of the word (CSS, prose) before the last turn leaves the read tail-first, a
/// launch there makes it read whole, also when a chunk boundary of the prefix count
/// (256 KiB from the start) cuts it.
#[test]
fn a_background_launch_before_the_last_turn_is_found_a_css_background_is_not() {
    let css = claude_turns(100, "body { background: #333; color: #eee }", 0);
    assert!(css.len() > 300 * 1024);
    assert!(matches!(claude_plan(&css), Plan::Tail { .. }));

    for said in [
        "Command moved to the background with ID: b1x2",
        "Command running in background with ID: b1x2",
    ] {
        let plain = claude_turns(100, said, 0);
        assert_eq!(claude_plan(&plain), Plan::Full("background_task"), "{said}");
        // The word "background" starts 3 bytes before the boundary: the key's hit and
        // the whole needle lie in the window that holds the next chunk too.
        let key = said.find("background").unwrap();
        let at = memchr::memmem::find(&plain, said.as_bytes()).unwrap() + key;
        for shift in [3usize, 12, 30] {
            let pad = 256 * 1024 - shift - at;
            let cut = claude_turns(100, said, pad);
            let got = memchr::memmem::find(&cut, said.as_bytes()).unwrap() + key;
            assert_eq!(got, 256 * 1024 - shift);
            assert_eq!(
                claude_plan(&cut),
                Plan::Full("background_task"),
                "{said} {shift}"
            );
        }
    }
}

/// Every hazard's needles hold its key: a needle without it would never be searched for.
#[test]
fn every_hazard_needle_holds_the_key_searched_for() {
    let path = Path::new("/p/0f3c5a1e-0000-4000-8000-000000000000.jsonl");
    let mut keyed = 0;
    for agent in baton::provider::descriptor::ALL {
        for h in baton::provider::restart::hazards(agent.kind(), path) {
            assert!(!h.key.is_empty(), "{}: {}", agent.id(), h.why);
            for n in h.needles {
                assert!(
                    memchr::memmem::find(n, h.key).is_some(),
                    "{}: {:?} lacks {:?}",
                    agent.id(),
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(h.key)
                );
                keyed += 1;
            }
        }
    }
    assert!(keyed >= 3, "{keyed} keyed needles");
}

/// The file's end is kept as read backwards while it fits in 4 MiB, lines that span the
/// 64 KiB chunks included; past that it is not kept, and the restart point is the same
/// either way, and the same as the daemon's read (which keeps nothing) finds.
#[test]
fn the_kept_tail_is_the_file_end_across_chunks_and_nothing_past_its_cap() {
    use common::claude;
    let dir = tempfile::tempdir().unwrap();
    for (answers, kept) in [(5usize, true), (45, false)] {
        let mut lines = vec![
            claude::prompt("p0", 0, "first"),
            claude::text("a0", 1, "m0", "done", Some("end_turn")),
            claude::prompt("p1", 2, "second"),
        ];
        // Lines of 100 KB (each spans a chunk boundary) and one too long to look at.
        for i in 0..answers {
            let len = if i == 2 { 300_000 } else { 100_000 };
            let text = format!("{i}{}", "z".repeat(len));
            lines.push(claude::text(&format!("t{i}"), 3, "m1", &text, None));
        }
        lines.push(claude::text("a1", 4, "m1", "all done", Some("end_turn")));
        let data = common::lines(&lines);
        // The line too long to look at could start a turn: the read cannot jump over
        // it, and restarts at the answer before the last prompt.
        let answer = memchr::memmem::find(&data, b"\"uuid\":\"a0\"").unwrap();
        let line_start = memchr::memrchr(b'\n', &data[..answer]).unwrap() as u64 + 1;

        let plan = claude_plan(&data);
        let Plan::Tail { start, tail } = plan else {
            panic!("{answers} answers: {plan:?}");
        };
        let offset = start.offset;
        assert_eq!(offset, line_start, "{answers} answers");
        let off = usize::try_from(offset).unwrap();
        match tail {
            Some(t) => {
                assert!(kept, "{answers} answers: kept past the cap");
                assert_eq!(t.bytes(), &data[off..]);
            }
            None => assert!(!kept, "{answers} answers: not kept"),
        }

        let sub = dir.path().join(answers.to_string());
        std::fs::create_dir(&sub).unwrap();
        let path = sub.join(format!("{}.jsonl", common::claude::SESSION));
        std::fs::write(&path, &data).unwrap();
        let feed = tail_first::open_feed(
            baton::feed::name_of(&path),
            &path,
            ProviderKind::Claude,
            MAX_LINE,
        )
        .unwrap();
        assert_eq!(feed.start(), offset, "{answers} answers: the daemon's read");
    }
}
