//! Shared test harness: run transcript bytes through the real pipeline.
#![allow(dead_code, unused_imports, clippy::unwrap_used)]

pub mod bus;
mod daemon;
pub mod desktop;
mod live;
pub mod opencode;
pub mod stream;
pub mod tmpfs;

pub use daemon::*;
pub use live::Live;

use baton::model::{Event, ProviderKind};
use baton::replay::{self, AtEof, Options};
use baton::watch::Found;
use std::path::{Path, PathBuf};

pub const SETTLE_MS: u64 = 90_000;

pub fn options(settle_ms: u64) -> Options {
    Options {
        settle_ms,
        max_line: baton::tail::DEFAULT_MAX_LINE_BYTES,
        seen_capacity: 65_536,
        threads: 0,
    }
}

/// Replays files (in order, through one reducer) and returns their events.
pub fn replay_files(files: &[(PathBuf, ProviderKind)], opts: &Options) -> Vec<Event> {
    let found: Vec<Found> = files
        .iter()
        .map(|(p, k)| Found {
            path: p.clone(),
            provider: *k,
        })
        .collect();
    let mut out = Vec::new();
    replay::run(&found, opts, AtEof::RunOn, |e| {
        out.push(e.clone());
        Ok(())
    })
    .expect("replay");
    out
}

/// Writes `bytes` to `dir/name` and replays it.
pub fn replay_bytes(
    dir: &Path,
    name: &str,
    provider: ProviderKind,
    bytes: &[u8],
    opts: &Options,
) -> Vec<Event> {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(&path, bytes).expect("write");
    replay_files(&[(path, provider)], opts)
}

/// Asserts a `baton` run succeeded, showing its stderr if not.
pub fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The JSON lines a `baton` run printed, once it is known to have succeeded.
pub fn json_lines(out: &std::process::Output) -> Vec<serde_json::Value> {
    assert_ok(out);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `event` names in order, for terse assertions.
pub fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.event.as_str()).collect()
}

/// The shared corpus, or `None` (with a printed notice) when this clone has no
/// `../shared` beside it.
pub fn corpus() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    if p.is_dir() {
        Some(p)
    } else {
        println!("NOTICE: ../shared/corpus is absent; corpus tests skipped.");
        None
    }
}

/// A tree from `../shared/tools/gen-corpus.py` (with `args`) at `out`, and its manifest;
/// `None`, with a printed notice, when the tool is absent.
pub fn generate(out: &Path, args: &[&str]) -> Option<serde_json::Value> {
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/gen-corpus.py");
    if !tool.is_file() {
        println!("NOTICE: ../shared/tools/gen-corpus.py is absent; test skipped.");
        return None;
    }
    let made = std::process::Command::new("python3")
        .arg(&tool)
        .arg(out)
        .args(args)
        .output()
        .expect("python3");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    Some(serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap())
}

/// `bytes` in about `parts` pieces, each cut just after a newline.
pub fn line_chunks(bytes: &[u8], parts: usize) -> Vec<&[u8]> {
    let step = (bytes.len() / parts.max(1)).max(1);
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let from = (at + step).min(bytes.len());
        let end = bytes[from..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |p| from + p + 1);
        out.push(&bytes[at..end]);
        at = end;
    }
    out
}

/// Feeds `bytes` to `fd` and `r` on a clock that follows the records' times, firing due
/// settle timers before each observation.
pub fn feed_ticking(
    fd: &mut baton::feed::FileFeed,
    r: &mut baton::reduce::Reducer,
    clock: &mut i64,
    bytes: &[u8],
    out: &mut Vec<Event>,
) {
    fd.feed(bytes, |src, obs| {
        if let Some(t) = obs.record_ts {
            *clock = (*clock).max(t);
        }
        let now = baton::clock::Now::virtual_at(*clock);
        r.tick(now, out);
        r.apply(src, obs, now, out);
    });
}

/// Claude Code record builders (shapes from shared/docs/transcript-formats.md).
pub mod claude {
    use serde_json::json;

    pub const SESSION: &str = "11111111-2222-4333-8444-555555555555";

    fn ts(sec: u32) -> String {
        format!("2026-03-01T10:{:02}:{:02}.000Z", sec / 60, sec % 60)
    }

    pub fn prompt(uuid: &str, sec: u32, text: &str) -> String {
        json!({"type":"user","uuid":uuid,"parentUuid":null,"sessionId":SESSION,"isSidechain":false,"timestamp":ts(sec),"message":{"role":"user","content":text}}).to_string()
    }

    pub fn text(uuid: &str, sec: u32, msg_id: &str, text: &str, stop: Option<&str>) -> String {
        json!({"type":"assistant","uuid":uuid,"sessionId":SESSION,"isSidechain":false,"timestamp":ts(sec),"message":{"id":msg_id,"model":"claude-opus-4-6","role":"assistant","content":[{"type":"text","text":text}],"stop_reason":stop}}).to_string()
    }

    pub fn tool_use(uuid: &str, sec: u32, msg_id: &str, tool_id: &str, name: &str) -> String {
        json!({"type":"assistant","uuid":uuid,"sessionId":SESSION,"isSidechain":false,"timestamp":ts(sec),"message":{"id":msg_id,"model":"claude-opus-4-6","role":"assistant","content":[{"type":"tool_use","id":tool_id,"name":name,"input":{}}],"stop_reason":null}}).to_string()
    }

    pub fn tool_result(uuid: &str, sec: u32, tool_id: &str) -> String {
        json!({"type":"user","uuid":uuid,"sessionId":SESSION,"isSidechain":false,"timestamp":ts(sec),"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":tool_id,"content":"ok"}]},"toolUseResult":{"stdout":"ok"}}).to_string()
    }

    pub fn api_error(uuid: &str, sec: u32, text: &str) -> String {
        json!({"type":"assistant","uuid":uuid,"sessionId":SESSION,"isSidechain":false,"timestamp":ts(sec),"error":"rate_limit","isApiErrorMessage":true,"apiErrorStatus":429,"message":{"id":"4d66b61c-0000-4000-8000-000000000000","model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","content":[{"type":"text","text":text}]}}).to_string()
    }

    pub fn sidechain_text(
        uuid: &str,
        parent: Option<&str>,
        sec: u32,
        text: &str,
        stop: Option<&str>,
    ) -> String {
        json!({"type":"assistant","uuid":uuid,"parentUuid":parent,"sessionId":SESSION,"isSidechain":true,"timestamp":ts(sec),"message":{"id":format!("msg_{uuid}"),"model":"claude-opus-4-6","role":"assistant","content":[{"type":"text","text":text}],"stop_reason":stop}}).to_string()
    }

    pub fn sidechain_prompt(uuid: &str, sec: u32, text: &str) -> String {
        json!({"type":"user","uuid":uuid,"parentUuid":null,"sessionId":SESSION,"isSidechain":true,"timestamp":ts(sec),"message":{"role":"user","content":text}}).to_string()
    }
}

/// Codex rollout record builders.
pub mod codex {
    use serde_json::json;

    pub const SESSION: &str = "019c0000-0000-7000-8000-000000000001";

    fn ts(sec: u32) -> String {
        format!("2026-03-01T10:{:02}:{:02}.000Z", sec / 60, sec % 60)
    }

    pub fn meta(sec: u32) -> String {
        json!({"timestamp":ts(sec),"type":"session_meta","payload":{"id":SESSION,"timestamp":ts(sec),"cwd":"/w","originator":"codex_cli_rs","cli_version":"0.135.0","source":"cli"}}).to_string()
    }

    pub fn child_meta(sec: u32, child: &str) -> String {
        json!({"timestamp":ts(sec),"type":"session_meta","payload":{"id":child,"timestamp":ts(sec),"cwd":"/w","originator":"codex_cli_rs","cli_version":"0.146.0","source":{"subagent":{"thread_spawn":{"parent_thread_id":SESSION,"depth":1,"agent_nickname":"Ada"}}}}}).to_string()
    }

    pub fn event(sec: u32, payload: serde_json::Value) -> String {
        json!({"timestamp":ts(sec),"type":"event_msg","payload":payload}).to_string()
    }

    pub fn started(sec: u32, turn: &str) -> String {
        event(
            sec,
            json!({"type":"task_started","turn_id":turn,"model_context_window":258_400}),
        )
    }

    pub fn complete(sec: u32, turn: &str, msg: &str) -> String {
        event(
            sec,
            json!({"type":"task_complete","turn_id":turn,"last_agent_message":msg}),
        )
    }

    pub fn user(sec: u32, text: &str) -> String {
        event(
            sec,
            json!({"type":"user_message","message":text,"images":[]}),
        )
    }

    pub fn answer(sec: u32, text: &str) -> String {
        json!({"timestamp":ts(sec),"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":text}],"phase":"final_answer"}}).to_string()
    }

    pub fn call(sec: u32, call_id: &str) -> String {
        json!({"timestamp":ts(sec),"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":call_id}}).to_string()
    }

    /// A `turn_context` with its approval policy.
    pub fn context(sec: u32, turn: &str, policy: &str) -> String {
        json!({"timestamp":ts(sec),"type":"turn_context","payload":{"turn_id":turn,"cwd":"/w","approval_policy":policy,"sandbox_policy":{"type":"workspace-write"}}}).to_string()
    }

    /// A shell call that asks to run outside the sandbox, for `why`.
    pub fn escalating_call(sec: u32, call_id: &str, why: &str) -> String {
        let args = json!({"command":["bash","-lc","./deploy.sh"],"sandbox_permissions":"require_escalated","justification":why});
        json!({"timestamp":ts(sec),"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":args.to_string(),"call_id":call_id}}).to_string()
    }

    pub fn output(sec: u32, call_id: &str) -> String {
        json!({"timestamp":ts(sec),"type":"response_item","payload":{"type":"function_call_output","call_id":call_id,"output":"ok"}}).to_string()
    }
}

/// Joins records into JSONL bytes (each line newline-terminated).
pub fn lines(records: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        out.extend_from_slice(r.as_bytes());
        out.push(b'\n');
    }
    out
}

pub fn field_text(v: &serde_json::Value, key: &str) -> String {
    match &v[key] {
        serde_json::Value::Null => "-".to_owned(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `baton replay ARGS PATHS`, each event of `provider` reduced to one line with the
/// fields that decide it (`session/agent` when `with_agent`).
pub fn replay_summary(
    provider: &str,
    with_agent: bool,
    args: &[&str],
    paths: &[PathBuf],
) -> Vec<String> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("replay")
        .args(args)
        .args(paths)
        .output()
        .expect("runs baton");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("JSON event");
            assert_eq!(v["provider"], provider);
            let who = if with_agent {
                format!("{}/{}", field_text(&v, "session"), field_text(&v, "agent"))
            } else {
                field_text(&v, "session")
            };
            let mut s = format!(
                "{} {who} turn={} line={} rts={}",
                field_text(&v, "event"),
                field_text(&v, "turn"),
                field_text(&v, "line"),
                field_text(&v, "record_ts")
            );
            for key in ["evidence", "reason", "pre_tokens", "message"] {
                if !v[key].is_null() {
                    s.push_str(&format!(" {key}={}", field_text(&v, key)));
                }
            }
            s
        })
        .collect()
}

/// A main-conversation Claude event for sink tests: turn `t<n>`, id `id<n>`.
pub fn sample_event(kind: baton::model::EventKind, n: u32, message: &str) -> Event {
    let mut e = Event::lifecycle(
        kind,
        "2026-01-01T00:00:00.000Z".to_owned(),
        format!("id{n}"),
    );
    e.provider = Some(ProviderKind::Claude);
    e.session = Some("5f1c8a2e-0000-4000-8000-00000000abcd".to_owned());
    e.turn = Some(format!("t{n}"));
    e.path = Some("/home/me/.claude/projects/-home-me-src-web/s.jsonl".to_owned());
    // As the reducer stamps it from the session's `cwd` (/home/me/src/web).
    e.project = Some("web".to_owned());
    e.line = Some(u64::from(n));
    e.message = Some(message.to_owned());
    e
}

/// Whether process `pid` exists and is not a zombie (a killed process whose new parent
/// never reaps it stays a zombie, which is dead for every purpose here).
pub fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        // `pid (comm) S …`: the state follows the last ')'.
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// The process group of `pid`, if it runs.
pub fn process_group(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = s.rsplit_once(')')?;
    // state, ppid, pgrp
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// Waits until `path` holds a number and a newline (a pid a script wrote), and returns it.
pub fn read_pid(path: &Path) -> u32 {
    let start = std::time::Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(path)
            && s.ends_with('\n')
            && let Ok(n) = s.trim().parse()
        {
            return n;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "{} never held a pid",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
