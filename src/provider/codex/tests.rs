//! The fast path for plain records ([`super::plain`]) against the full parse: on every
//! real Codex rollout, on those lines written the ways the byte layout does not expect
//! (spaces, other key order, escapes), on lines changed so that they do decide
//! something, and on broken lines, both must give the same observations and leave the
//! projector in the same state.

#![allow(clippy::unwrap_used)]

use super::CodexProjector;
use super::plain::{looks_plain, plain, plain_run};
use crate::provider::{Obs, Projector};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const PATH: &str = "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl";

/// How a line is projected in these tests.
#[derive(Clone, Copy, Debug)]
enum Route {
    /// As in production: the fast path for lines with Codex's own layout.
    Fast,
    /// The fast path tried on every line, whatever its layout.
    Scan,
    /// The full parse alone.
    Full,
}

/// One line through a projector restored from `state`. Gives the observations, the
/// error, and the state after.
fn run(state: &str, line: &[u8], route: Route) -> (Vec<Obs>, Result<(), String>, String) {
    let mut p = CodexProjector::new(Path::new(PATH));
    assert!(p.restore(state));
    let mut out = Vec::new();
    let gate: Option<fn(&[u8]) -> bool> = match route {
        Route::Fast => Some(looks_plain),
        Route::Scan => Some(|_| true),
        Route::Full => None,
    };
    let res = p.project_with(line, &mut out, gate).map_err(|e| e.0);
    (out, res, p.save())
}

/// Asserts that `line` projects the same all ways from `state`.
fn same(state: &str, line: &[u8]) {
    let full = run(state, line, Route::Full);
    for route in [Route::Fast, Route::Scan] {
        assert_eq!(
            run(state, line, route),
            full,
            "{route:?} and the full parse differ on\n{}",
            String::from_utf8_lossy(line)
        );
    }
}

fn corpus_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/codex"),
        &mut out,
    );
    out.sort();
    out
}

/// Every corpus line, with the projector state before it (from a run of the full parse).
fn corpus_lines() -> Vec<(String, Vec<u8>)> {
    static LINES: std::sync::LazyLock<Vec<(String, Vec<u8>)>> =
        std::sync::LazyLock::new(read_corpus_lines);
    LINES.clone()
}

fn read_corpus_lines() -> Vec<(String, Vec<u8>)> {
    let mut lines = Vec::new();
    for f in corpus_files() {
        let mut p = CodexProjector::new(&f);
        let bytes = std::fs::read(&f).unwrap();
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            lines.push((p.save(), line.to_vec()));
            let _ = p.project_with(line, &mut Vec::new(), None);
        }
    }
    if lines.is_empty() {
        println!("NOTICE: ../shared/corpus is absent; Codex corpus lines skipped.");
    }
    lines
}

/// Records that decide something, in the shapes of shared/docs/transcript-formats.md, for
/// the mutations below: the corpus lacks some (a rate limit hit, a question).
fn deciding_lines() -> Vec<Vec<u8>> {
    let ts = "2026-03-01T10:00:05.000Z";
    let rec = |ty: &str, payload: Value| {
        json!({"timestamp": ts, "type": ty, "payload": payload})
            .to_string()
            .into_bytes()
    };
    vec![
        // As Codex lays it out, so that it takes the fast path's door.
        format!(
            "{{\"timestamp\":\"{ts}\",\"type\":\"event_msg\",\"payload\":{{\"type\":\
             \"token_count\",\"info\":null,\"rate_limits\":{{\"limit_id\":\"codex\",\
             \"rate_limit_reached_type\":\"usage_limit\",\"primary\":{{\"used_percent\":\
             100.0,\"window_minutes\":300,\"resets_at\":1771864834}},\"secondary\":null}}}}}}"
        )
        .into_bytes(),
        rec(
            "response_item",
            json!({"type":"function_call","name":"request_user_input",
                "arguments":"{\"questions\":[{\"question\":\"Ship it?\"}]}","call_id":"c9"}),
        ),
        rec(
            "response_item",
            json!({"type":"message","role":"assistant","content":[{"type":"output_text",
                "text":"All done."}]}),
        ),
        rec(
            "event_msg",
            json!({"type":"task_complete","turn_id":"t1","last_agent_message":"done"}),
        ),
        rec(
            "event_msg",
            json!({"type":"error","message":"You've hit your usage limit|1771864834",
                "codex_error_info":"usage_limit_exceeded"}),
        ),
        rec(
            "event_msg",
            json!({"type":"user_message","message":"go on"}),
        ),
        rec("event_msg", json!({"type":"task_started","turn_id":"t2"})),
        rec(
            "event_msg",
            json!({"type":"turn_aborted","turn_id":"t2","reason":"interrupted"}),
        ),
        rec(
            "session_meta",
            json!({"id":"019c0000-0000-7000-8000-000000000001","forked_from_id":"x",
                "source":{"subagent":{"thread_spawn":{"parent_thread_id":"p"}}}}),
        ),
        rec("compacted", json!({"message":"summary"})),
    ]
}

/// The same record written in ways Codex's own layout never uses, plus changes that make
/// a plain record decide something, or break it.
fn variants(line: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8_lossy(line).into_owned();
    let mut out = vec![
        // Spaces around colons and commas.
        text.replace("\":", "\" : ")
            .replace(",\"", " , \"")
            .into_bytes(),
        // Keys escaped, and type names escaped.
        text.replace("\"type\":", "\"\\u0074ype\":").into_bytes(),
        text.replace("\"type\":\"", "\"type\":\"\\u0020")
            .into_bytes(),
        text.replace("_count\"", "\\u005fcount\"")
            .replace("context\"", "con\\u0074ext\"")
            .replace("reasoning\"", "reason\\u0069ng\"")
            .into_bytes(),
        text.replace("\"role\":\"user\"", "\"role\":\"assist\\u0061nt\"")
            .into_bytes(),
        // A limit hit, plainly and with an escaped key.
        text.replace(
            "\"rate_limits\":{",
            "\"rate_limits\":{\"rate_limit_reached_type\":\"usage_limit\",",
        )
        .into_bytes(),
        text.replace(
            "\"rate_limits\":{",
            "\"rate_limits\":{\"rate_limit_reached_typ\\u0065\":\"usage_limit\",",
        )
        .into_bytes(),
        // The question tool, and an assistant answer.
        text.replace("\"name\":\"", "\"name\":\"request_user_input\",\"x\":\"")
            .into_bytes(),
        text.replace("\"role\":\"user\"", "\"role\":\"assistant\"")
            .replace("\"role\":\"developer\"", "\"role\":\"assistant\"")
            .into_bytes(),
        // A field given twice, of the wrong type, or out of an f64's range.
        text.replacen("{\"timestamp\"", "{\"type\":\"event_msg\",\"timestamp\"", 1)
            .into_bytes(),
        text.replace("\"call_id\":\"", "\"call_id\":7,\"c\":\"")
            .into_bytes(),
        text.replace("\"resets_at\":", "\"resets_at\":1.5,\"r\":")
            .into_bytes(),
        text.replace("\"used_percent\":", "\"used_percent\":1e999,\"u\":")
            .into_bytes(),
        text.replace("\"payload\":{", "\"payload\":{\"turn_id\":5,")
            .into_bytes(),
        text.replace("\"payload\":{", "\"payload\":{\"message\":1e999,")
            .into_bytes(),
        text.replace("\"payload\":{", "\"payload\":{\"content\":[1],")
            .into_bytes(),
        text.replace("\"payload\":{", "\"payload\":{\"content\":-1e999,")
            .into_bytes(),
        text.replace("\"payload\":{", "\"payload\":{\"x\":\"\\ud800\",")
            .into_bytes(),
        // Bad UTF-8 in a field the full parse decodes.
        text.replace("\"payload\":{", "\"payload\":{\"phase\":\"\u{7f}\",")
            .into_bytes()
            .into_iter()
            .map(|b| if b == 0x7f { 0xff } else { b })
            .collect(),
        // Broken: cut short, clobbered by another write, glued to bad bytes.
        line[..line.len() / 2].to_vec(),
        [&line[..line.len() / 3], line].concat(),
        [line, b"x"].concat(),
        [line, &[0xff][..]].concat(),
        text.replace("\",\"", "\",\u{1}\"").into_bytes(),
    ];
    // Every key order the parsed value gives (serde_json sorts keys) and its pretty form
    // on one line.
    if let Ok(v) = serde_json::from_slice::<Value>(line) {
        out.push(v.to_string().into_bytes());
        out.push(
            serde_json::to_string_pretty(&v)
                .unwrap()
                .replace('\n', " ")
                .into_bytes(),
        );
    }
    out
}

#[test]
fn the_fast_path_agrees_with_the_full_parse_on_every_corpus_line() {
    let lines = corpus_lines();
    let mut taken = 0;
    for (state, line) in &lines {
        same(state, line);
        if looks_plain(line) && plain(line, false).is_some() {
            taken += 1;
        }
    }
    // Not vacuous: most corpus lines take the fast path.
    assert!(
        lines.is_empty() || taken * 2 > lines.len(),
        "{taken} of {} lines took the fast path",
        lines.len()
    );
}

#[test]
fn the_fast_path_agrees_on_lines_written_otherwise() {
    let mut lines = corpus_lines();
    let fresh = CodexProjector::new(Path::new(PATH)).save();
    lines.extend(deciding_lines().into_iter().map(|l| (fresh.clone(), l)));
    let mut seen = std::collections::HashSet::new();
    for (state, line) in &lines {
        // One line of each record kind and layout is enough for the variants.
        let head: Vec<u8> = line.iter().copied().skip(40).take(60).collect();
        if !seen.insert(head) {
            continue;
        }
        for v in variants(line) {
            same(state, &v);
        }
    }
}

#[test]
fn a_limit_hit_in_a_token_count_is_never_skipped() {
    let line = deciding_lines().remove(0);
    let fresh = CodexProjector::new(Path::new(PATH)).save();
    assert!(looks_plain(&line));
    let (obs, ..) = run(&fresh, &line, Route::Fast);
    assert_eq!(obs.len(), 1, "{obs:?}");
    assert!(matches!(
        obs[0].kind,
        crate::provider::ObsKind::Failed { .. }
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random damage to real lines: wherever the fast path takes a line, the full parse
    /// takes it too, with the same outcome.
    #[test]
    fn damaged_lines_project_the_same_both_ways(
        pick in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        edit in 0..4u8,
        byte in prop::sample::select(b"{}[]\",:\\ 0123456789.eE-+nultrfa\x01\x7f".to_vec()),
    ) {
        let fresh = CodexProjector::new(Path::new(PATH)).save();
        let deciding = deciding_lines();
        let corpus = corpus_lines();
        let n = pick.index(corpus.len() + deciding.len());
        let (state, line) = match corpus.get(n) {
            Some((s, l)) => (s.clone(), l.clone()),
            None => (fresh, deciding[n - corpus.len()].clone()),
        };
        let i = at.index(line.len());
        let mut damaged = line.clone();
        match edit {
            0 => damaged.insert(i, byte),
            1 => { damaged.remove(i); }
            2 => damaged[i] = byte,
            _ => damaged.truncate(i),
        }
        prop_assume!(!damaged.is_empty());
        let full = run(&state, &damaged, Route::Full);
        prop_assert_eq!(run(&state, &damaged, Route::Fast), full.clone());
        prop_assert_eq!(run(&state, &damaged, Route::Scan), full);
    }
}

/// A forked child's rollout: its meta, the parent's meta, a copy of the parent's history
/// in Codex's own layout (plain records among them) all at one time, then the child's own
/// turn. Inside the copy every record's time counts, so the fast path must stand aside.
#[test]
fn a_forked_childs_copy_projects_the_same_both_ways() {
    let at = |ts: &str, ty: &str, payload: &str| {
        format!("{{\"timestamp\":\"{ts}\",\"type\":\"{ty}\",\"payload\":{payload}}}")
    };
    let copy = "2026-03-01T10:00:00.000Z";
    let own = "2026-03-01T10:00:07.000Z";
    let lines = [
        at(
            copy,
            "session_meta",
            r#"{"id":"019c0000-0000-7000-8000-00000000000c","forked_from_id":"019c0000-0000-7000-8000-00000000000a"}"#,
        ),
        at(
            copy,
            "session_meta",
            r#"{"id":"019c0000-0000-7000-8000-00000000000a"}"#,
        ),
        at(
            copy,
            "event_msg",
            r#"{"type":"task_started","turn_id":"parent-turn"}"#,
        ),
        at(
            copy,
            "turn_context",
            r#"{"turn_id":"parent-turn","cwd":"/x"}"#,
        ),
        at(
            copy,
            "response_item",
            r#"{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c1"}"#,
        ),
        at(
            copy,
            "response_item",
            r#"{"type":"function_call_output","call_id":"c1","output":"ok"}"#,
        ),
        // The first record with a later time ends the copy, and is the child's own.
        at(
            own,
            "response_item",
            r#"{"type":"reasoning","summary":[],"content":null}"#,
        ),
        at(
            own,
            "event_msg",
            r#"{"type":"task_started","turn_id":"child-turn"}"#,
        ),
        at(
            own,
            "event_msg",
            r#"{"type":"agent_reasoning","text":"hm"}"#,
        ),
        at(
            own,
            "event_msg",
            r#"{"type":"task_complete","turn_id":"child-turn","last_agent_message":"done"}"#,
        ),
    ];
    let mut states =
        [Route::Fast, Route::Full].map(|_| CodexProjector::new(Path::new(PATH)).save());
    let mut outs: [Vec<Obs>; 2] = [Vec::new(), Vec::new()];
    for line in &lines {
        assert!(
            line.contains("session_meta") || line.contains("task_") || looks_plain(line.as_bytes())
        );
        for (n, route) in [Route::Fast, Route::Full].into_iter().enumerate() {
            let (obs, res, after) = run(&states[n], line.as_bytes(), route);
            assert_eq!(res, Ok(()));
            outs[n].extend(obs);
            states[n] = after;
        }
        assert_eq!(states[0], states[1], "after {line}");
    }
    assert_eq!(outs[0], outs[1]);
    // The child's own reasoning, after the copy, is seen.
    assert!(
        outs[0]
            .iter()
            .any(|o| o.record_ts.is_some_and(|t| t > 1_772_359_200_000))
    );
}

/// Plain records in Codex's layout, with an object of every kind the fast path checks:
/// the top, the payload, the rate limits and a window, a content item, an error. Some
/// lack the fields the full parse reads, so that a field put in is not given twice.
const PLAIN: [&str; 7] = [
    r#"{"timestamp":"2026-03-01T10:00:05.000Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"limit_id":"codex","primary":{"used_percent":13.0,"window_minutes":300,"resets_at":1771864834},"secondary":null}}}"#,
    r#"{"timestamp":"2026-03-01T10:00:05.000Z","type":"event_msg","payload":{"type":"token_count","rate_limits":{"primary":{"window_minutes":300}}}}"#,
    r#"{"timestamp":"2026-03-01T10:00:05.000Z","type":"turn_context","payload":{"cwd":"/x","sandbox_policy":{"type":"workspace-write"}}}"#,
    r#"{"timestamp":"2026-03-01T10:00:05.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
    r#"{"timestamp":"2026-03-01T10:00:05.000Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text"}]}}"#,
    r#"{"timestamp":"2026-03-01T10:00:05.000Z","type":"response_item","payload":{"type":"function_call","name":"exec_command","call_id":"c1"}}"#,
    r#"{"timestamp":"2026-03-01T10:00:05.000Z","type":"event_msg","payload":{"type":"agent_message","error":{"x":1}}}"#,
];

/// Where a field can go in the [`PLAIN`] records: just inside each kind of object.
const OPENINGS: [&str; 6] = [
    "{\"timestamp\"",
    "\"payload\":{",
    "\"rate_limits\":{",
    "\"primary\":{",
    "\"content\":[{",
    "\"error\":{",
];

/// Field names the full parse reads somewhere, and two it does not.
const NAMES: [&str; 30] = [
    "timestamp",
    "approval_policy",
    "type",
    "payload",
    "id",
    "role",
    "call_id",
    "name",
    "rate_limits",
    "parent_thread_id",
    "turn_id",
    "last_agent_message",
    "reason",
    "phase",
    "arguments",
    "forked_from_id",
    "source",
    "message",
    "codex_error_info",
    "error",
    "content",
    "rate_limit_reached_type",
    "primary",
    "secondary",
    "used_percent",
    "resets_at",
    "text",
    "info",
    "x",
    "\\u0074ype",
];

/// Values of every type, with the numbers and strings a decoder may refuse.
const VALUES: [&str; 25] = [
    "null",
    r#""on-request""#,
    r#""{\"sandbox_permissions\":\"require_escalated\",\"justification\":\"j\"}""#,
    "true",
    "7",
    "-0",
    "1.5",
    "1e999",
    "-1e400",
    "18446744073709551616",
    "9223372036854775808",
    "-9223372036854775809",
    "123456789012345678901234567890",
    r#""s""#,
    r#""\n\u0041""#,
    r#""\ud800""#,
    r#""\udc00\ud800""#,
    r#""usage_limit""#,
    "[]",
    "[1e999]",
    r#"[{"text":5}]"#,
    r#"[{"text":"a"}]"#,
    "{}",
    r#"{"message":5}"#,
    r#"{"subagent":{"thread_spawn":{"parent_thread_id":1e999}}}"#,
];

/// `field` put first in the object `opening` begins.
fn with_field(base: &str, opening: &str, field: &str) -> String {
    match opening {
        "{\"timestamp\"" => base.replacen('{', &format!("{{{field}"), 1),
        _ => base.replacen(opening, &format!("{opening}{field}"), 1),
    }
}

/// Every field name, with every kind of value, in every object the fast path checks.
#[test]
fn every_field_with_every_value_projects_the_same_both_ways() {
    let fresh = CodexProjector::new(Path::new(PATH)).save();
    let asking = asking_state();
    let mut taken = 0;
    for base in PLAIN {
        for opening in OPENINGS.iter().filter(|o| base.contains(**o)) {
            for name in NAMES {
                for value in VALUES {
                    let line = with_field(base, opening, &format!("\"{name}\":{value},"));
                    same(&fresh, line.as_bytes());
                    same(&asking, line.as_bytes());
                    taken += usize::from(plain(line.as_bytes(), false).is_some());
                }
            }
        }
    }
    // Not vacuous: the fast path takes many of them.
    assert!(taken > 1000, "{taken}");
}

/// JSON values of every type, nested.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        prop::sample::select(VALUES.to_vec()).prop_map(str::to_owned),
        "-?(0|[1-9][0-9]{0,24})(\\.[0-9]{1,4})?([eE][+-]?[0-9]{1,3})?",
        "\"([a-z ]|\\\\n|\\\\\"|\\\\u00[0-7][0-9a-f]|\\\\ud[89ab][0-9a-f]{2}|\\\\udc00){0,4}\"",
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((prop::sample::select(NAMES.to_vec()), inner), 0..3).prop_map(
                |v| {
                    let fields: Vec<String> =
                        v.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{{}}}", fields.join(","))
                }
            ),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Nested values of any shape for any field: the fast path takes the line only where
    /// the full parse reads it the same way.
    #[test]
    fn any_nested_field_projects_the_same_both_ways(
        (base, opening) in prop::sample::select(
            PLAIN
                .iter()
                .flat_map(|b| OPENINGS.iter().filter(|o| b.contains(**o)).map(|o| (*b, *o)))
                .collect::<Vec<_>>(),
        ),
        name in prop::sample::select(NAMES.to_vec()),
        value in json_value(),
    ) {
        let line = with_field(base, opening, &format!("\"{name}\":{value},"));
        let fresh = CodexProjector::new(Path::new(PATH)).save();
        let full = run(&fresh, line.as_bytes(), Route::Full);
        prop_assert_eq!(run(&fresh, line.as_bytes(), Route::Fast), full.clone(), "{}", line);
        prop_assert_eq!(run(&fresh, line.as_bytes(), Route::Scan), full, "{}", line);
    }
}

proptest! {
    /// The word-at-a-time string scan stops where a byte-by-byte one does.
    #[test]
    fn plain_run_stops_at_the_first_quote_backslash_or_control(
        bytes in prop::collection::vec(
            prop_oneof![8 => 0x20u8..0x7f, 1 => Just(b'"'), 1 => Just(b'\\'), 1 => 0u8..0x20, 1 => 0x80u8..=0xff],
            0..120,
        ),
        plain_len in 0usize..150,
    ) {
        // A clean run first, so that the scan goes some words before it stops.
        let mut s: Vec<u8> = std::iter::repeat_n(b'a', plain_len).collect();
        s.extend(bytes);
        let want = s
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .unwrap_or(s.len());
        prop_assert_eq!(plain_run(&s), want);
    }
}

/// A projector state after a `turn_context` whose policy asks the person.
fn asking_state() -> String {
    let mut p = CodexProjector::new(Path::new(PATH));
    let ctx = r#"{"timestamp":"2026-11-20T10:00:00.000Z","type":"turn_context","payload":{"cwd":"/x","approval_policy":"on-request"}}"#;
    p.project(ctx.as_bytes(), &mut Vec::new()).unwrap();
    p.save()
}

/// An `exec_command` call asking to run outside the sandbox (F.4), with `policy` set by
/// the `turn_context` before it.
fn escalation_obs(policy: &str, route: Route) -> Vec<Obs> {
    let fresh = CodexProjector::new(Path::new(PATH)).save();
    let ctx = format!(
        r#"{{"timestamp":"2026-11-20T10:00:00.000Z","type":"turn_context","payload":{{"cwd":"/x","approval_policy":"{policy}","sandbox_policy":{{"type":"workspace-write"}}}}}}"#
    );
    let (_, res, state) = run(&fresh, ctx.as_bytes(), route);
    res.unwrap();
    let args = serde_json::to_string(&json!({
        "cmd": "npm run dev",
        "sandbox_permissions": "require_escalated",
        "justification": "Do you want to allow restarting the <local> test server?"
    }))
    .unwrap();
    let call = json!({"timestamp":"2026-11-20T10:00:01.000Z","type":"response_item",
        "payload":{"type":"function_call","name":"exec_command","arguments":args,"call_id":"call_e1"}});
    let (obs, res, _) = run(&state, call.to_string().as_bytes(), route);
    res.unwrap();
    obs
}

#[test]
fn an_escalation_request_waits_for_the_person_only_under_a_policy_that_asks() {
    use crate::provider::ObsKind;
    for route in [Route::Fast, Route::Full] {
        for policy in ["on-request", "untrusted"] {
            let obs = escalation_obs(policy, route);
            let [o] = obs.as_slice() else {
                panic!("{obs:?}")
            };
            let ObsKind::ToolCall {
                id,
                needs_input,
                message,
            } = &o.kind
            else {
                panic!("{o:?}")
            };
            assert_eq!(id, "call_e1");
            assert_eq!(
                needs_input.as_deref(),
                Some("approval"),
                "{policy} {route:?}"
            );
            assert_eq!(
                message.as_deref(),
                Some("Do you want to allow restarting the <local> test server?")
            );
        }
        let obs = escalation_obs("never", route);
        assert!(
            matches!(obs.as_slice(), [o] if matches!(&o.kind, ObsKind::ToolCall { needs_input: None, .. })),
            "{obs:?}"
        );
    }
}
