//! Reducer scenarios as data: each tests/cases/reducer/*.toml holds transcript records
//! and the exact events they must produce. An expectation is `event key=value ...`; only
//! the keys given are compared (`-` stands for null; `supersedes=#N` names the N-th event).

#![allow(clippy::unwrap_used)]

use crate::common;

use baton::model::{Event, ProviderKind};
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    description: String,
    provider: String,
    #[serde(default)]
    settle: Option<String>,
    /// Where the transcript sits, relative to a temp dir (subagent layouts need it).
    #[serde(default)]
    file: Option<String>,
    records: String,
    expect: Vec<String>,
}

/// The value of `key` in `e`; `all` is every event of the case, so `supersedes` can name
/// the event it takes back by its 1-based position.
fn field(e: &Event, key: &str, all: &[Event]) -> Option<String> {
    match key {
        "supersedes" => e.supersedes.as_ref().map(|id| {
            all.iter()
                .position(|o| &o.id == id)
                .map_or_else(|| format!("unknown id {id}"), |i| format!("#{}", i + 1))
        }),
        "line" => e.line.map(|l| l.to_string()),
        "turn" => e.turn.clone(),
        "agent" => e.agent.clone(),
        "session" => e.session.clone(),
        "evidence" => e.evidence.clone(),
        "reason" => e.reason.clone(),
        "message" => e.message.clone(),
        "record_ts" => e.record_ts.clone(),
        "ts" => Some(e.ts.clone()),
        "resets_at" => e.resets_at.clone(),
        "initiator" => e.initiator.map(str::to_owned),
        "origin" => e.origin.map(str::to_owned),
        "background_tasks" => e.background_tasks.map(|n| n.to_string()),
        "pre_tokens" => e.pre_tokens.map(|t| t.to_string()),
        other => panic!("unknown expectation key `{other}`"),
    }
}

/// Splits on spaces, keeping `key="a b"` together (quotes removed).
fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn check(e: &Event, want: &str, all: &[Event]) -> Result<(), String> {
    let toks = tokens(want);
    let mut parts = toks.iter().map(String::as_str);
    let kind = parts.next().unwrap_or_default();
    if e.event.as_str() != kind {
        return Err(format!("event `{}`, want `{kind}`", e.event.as_str()));
    }
    for kv in parts {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("bad expectation `{kv}`"))?;
        let got = field(e, k, all);
        let ok = if v == "-" {
            got.is_none()
        } else {
            got.as_deref() == Some(v)
        };
        if !ok {
            return Err(format!("{k}={got:?}, want {v}"));
        }
    }
    Ok(())
}

fn run_case(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let case: Case = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let provider = ProviderKind::parse(&case.provider).ok_or("bad provider")?;
    let mut opts = common::options(common::SETTLE_MS);
    if let Some(s) = &case.settle {
        opts.settle_ms = baton::clock::parse_duration_ms(s)?;
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let name = case
        .file
        .as_deref()
        .unwrap_or("11111111-2222-4333-8444-555555555555.jsonl");
    let mut bytes = Vec::new();
    for l in case
        .records
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        bytes.extend_from_slice(l.as_bytes());
        bytes.push(b'\n');
    }
    let events = common::replay_bytes(dir.path(), name, provider, &bytes, &opts);
    let listing = events
        .iter()
        .map(Event::to_json)
        .collect::<Vec<_>>()
        .join("\n");
    if events.len() != case.expect.len() {
        return Err(format!(
            "{}: {} events, want {}:\n{listing}",
            case.description,
            events.len(),
            case.expect.len()
        ));
    }
    for (i, (e, want)) in events.iter().zip(&case.expect).enumerate() {
        check(e, want, &events)
            .map_err(|m| format!("{}: event {}: {m}\n{listing}", case.description, i + 1))?;
    }
    Ok(())
}

#[test]
fn reducer_scenarios() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases/reducer");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 15, "scenario files missing");
    let failures: Vec<String> = paths
        .iter()
        .filter_map(|p| run_case(p).err().map(|e| format!("{}: {e}", p.display())))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
