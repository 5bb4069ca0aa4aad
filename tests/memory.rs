//! Memory stays bounded by the largest line being read now, not by every large line any
//! file ever had: the real daemon, measured from /proc.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{Claude, Daemon, append};
use std::fs;

/// `VmHWM` (peak) and `VmRSS` (now) of a process, in bytes.
fn rss(pid: u32) -> (u64, u64) {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or_else(|| panic!("{name} missing from /proc/{pid}/status"))
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// The tests here measure one daemon's RSS each: run one at a time, so neither starves
/// the other's daemon on a small machine.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The daemon on a fresh tree and its `proj` folder, or `None` (with a notice) where
/// there is no /proc to measure it by.
fn start() -> Option<(Daemon, std::path::PathBuf)> {
    if !std::path::Path::new("/proc/self/status").exists() {
        println!("NOTICE: no /proc; memory test skipped.");
        return None;
    }
    let d = Daemon::tree().start(&[]);
    let dir = d.claude().join("proj");
    fs::create_dir_all(&dir).unwrap();
    Some((d, dir))
}

/// The RSS to measure from once the daemon has settled: the peak is reset to now where
/// the kernel allows it (Linux 4.0+), else the peak so far counts in it. With whether it
/// was reset.
fn baseline(pid: u32) -> (u64, bool) {
    std::thread::sleep(std::time::Duration::from_millis(300));
    let reset = fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
    let (peak0, rss0) = rss(pid);
    (if reset { rss0 } else { peak0.max(rss0) }, reset)
}

const FILES: usize = 64;
const LINE: usize = 5 * 1024 * 1024;

#[test]
fn large_lines_in_many_files_do_not_pin_memory() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some((mut d, dir)) = start() else { return };
    let pid = d.pid();

    // First every file with one small turn, so the baseline includes what each file
    // costs anyway (its reader, projector and session state).
    let sessions: Vec<Claude> = (0..FILES).map(|_| Claude::new()).collect();
    for c in &sessions {
        let (turn, _) = c.turn("hello", "small");
        // Written outside the tree and renamed in: the file appears whole.
        let tmp = d.dir.path().join("staging.jsonl");
        append(&tmp, turn.as_bytes());
        fs::rename(&tmp, c.path_in(&dir)).unwrap();
    }
    d.wait_count("small completions", FILES, |e| {
        e["event"] == "turn_completed"
    });
    let (baseline, reset) = baseline(pid);

    // Then one line of LINE bytes in every file: a final answer carrying the bulk.
    let mut turns = Vec::new();
    for (i, c) in sessions.iter().enumerate() {
        let (prompt, turn) = c.prompt("make it big");
        let answer = c.answer("");
        let pad = LINE - answer.len();
        let big = answer.replacen(
            "\"text\":\"\"",
            &format!(
                "\"text\":\"{}{}\"",
                i,
                "x".repeat(pad - 1 - i.to_string().len())
            ),
            1,
        );
        append(&c.path_in(&dir), format!("{prompt}{big}").as_bytes());
        turns.push(turn);
    }
    d.wait_count("completions", 2 * FILES, |e| e["event"] == "turn_completed");
    // Settled: give the daemon a moment past its last read.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (peak, now) = rss(pid);
    let bound = baseline + 2 * LINE as u64;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "baseline {:.1} MiB (peak reset: {reset}), peak {:.1} MiB, settled {:.1} MiB, bound {:.1} MiB",
        mib(baseline),
        mib(peak),
        mib(now),
        mib(bound)
    );
    assert!(
        now <= bound,
        "settled RSS {:.1} MiB exceeds baseline + 2 × line ({:.1} MiB)",
        mib(now),
        mib(bound)
    );
    assert!(
        peak <= bound,
        "peak RSS {:.1} MiB exceeds baseline + 2 × line ({:.1} MiB)",
        mib(peak),
        mib(bound)
    );
    let events = d.stop();
    for t in &turns {
        assert_eq!(common::count(&events, "turn_completed", t), 1);
    }
}

/// One append far larger than a read chunk (8 MiB), of many small records, is reduced a
/// chunk at a time: what a read holds before it reaches the reducer stays bounded, and
/// the turn still ends exactly once.
#[test]
fn one_huge_append_is_read_a_chunk_at_a_time() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some((mut d, dir)) = start() else { return };
    let pid = d.pid();
    let c = Claude::new();
    let (warm, _) = c.turn("hello", "small");
    append(&c.path_in(&dir), warm.as_bytes());
    d.wait_count("the first turn", 1, |e| e["event"] == "turn_completed");
    let (baseline, _) = baseline(pid);

    // 40 MiB of streamed assistant text in one write: each record is an observation.
    let (prompt, turn) = c.prompt("write a lot");
    let mut bulk = prompt;
    let text = "y".repeat(260);
    while bulk.len() < 40 * 1024 * 1024 {
        let line = serde_json::json!({
            "type": "assistant", "uuid": format!("p-{}", bulk.len()), "sessionId": c.session,
            "timestamp": "2026-11-29T10:00:00.000Z",
            "message": {"role": "assistant", "model": "claude-test",
                        "content": [{"type": "text", "text": text}], "stop_reason": null}
        });
        bulk.push_str(&format!("{line}\n"));
    }
    bulk.push_str(&c.answer("done at last"));
    append(&c.path_in(&dir), bulk.as_bytes());
    d.wait_count("the big turn", 2, |e| e["event"] == "turn_completed");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (peak, _) = rss(pid);
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let bound = baseline + 32 * 1024 * 1024;
    println!(
        "baseline {:.1} MiB, peak {:.1} MiB, bound {:.1} MiB",
        mib(baseline),
        mib(peak),
        mib(bound)
    );
    assert!(
        peak <= bound,
        "peak RSS {:.1} MiB over baseline + 32 MiB ({:.1} MiB) for a 40 MiB append",
        mib(peak),
        mib(bound)
    );
    let events = d.stop();
    assert_eq!(common::count(&events, "turn_completed", &turn), 1);
}

/// The allocator's settings built into the binary (`.cargo/config.toml`): one arena,
/// small thread caches and a short decay, which an idle daemon's memory is measured
/// with. jemalloc prints the options it runs with at exit when asked to.
#[cfg(not(feature = "system-alloc"))]
#[test]
fn the_binary_carries_its_allocator_settings() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("--version")
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for opt in [
        "opt.narenas: 1\n",
        "opt.tcache_nslots_small_max: 16\n",
        "opt.tcache_nslots_large: 4\n",
        "opt.dirty_decay_ms: 1000 ",
        "opt.background_thread: true",
    ] {
        assert!(
            err.contains(opt),
            "{opt:?} not in jemalloc's options:\n{err}"
        );
    }
}
