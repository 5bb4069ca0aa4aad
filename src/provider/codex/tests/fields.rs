//! One field at a time: every field name the full parse reads, with every kind of
//! value, put into every kind of object the fast path checks, then nested values of any
//! shape; and the string scan under them. The fast path may take such a line only where
//! the full parse reads it the same way.

use super::super::CodexProjector;
use super::super::plain::{plain, plain_run};
use super::{PATH, Route, run, same};
use crate::provider::Projector;
use proptest::prelude::*;
use std::path::Path;

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
