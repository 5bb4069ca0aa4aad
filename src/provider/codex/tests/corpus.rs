//! Real Codex lines and lines changed from them: every corpus line, the same records
//! written in layouts Codex never uses, records that decide something (the corpus lacks
//! some), and random damage. Kept together because the variants and the damage start
//! from the corpus and the deciding lines.

use super::super::CodexProjector;
use super::super::plain::{looks_plain, plain};
use super::{PATH, Route, run, same};
use crate::provider::Projector;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::path::Path;

/// Every corpus line, with the projector state before it (from a run of the full parse).
fn corpus_lines() -> Vec<(String, Vec<u8>)> {
    static LINES: std::sync::LazyLock<Vec<(String, Vec<u8>)>> =
        std::sync::LazyLock::new(read_corpus_lines);
    LINES.clone()
}

fn read_corpus_lines() -> Vec<(String, Vec<u8>)> {
    let mut lines = Vec::new();
    for f in crate::provider::corpus::corpus_files("codex") {
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
