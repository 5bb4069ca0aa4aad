//! Memory stays bounded by the largest line being read now, not by every large line any
//! file ever had: the real daemon, measured from /proc.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Claude, Daemon, append};
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

const FILES: usize = 64;
const LINE: usize = 5 * 1024 * 1024;

#[test]
fn large_lines_in_many_files_do_not_pin_memory() {
    if !std::path::Path::new("/proc/self/status").exists() {
        println!("NOTICE: no /proc; memory test skipped.");
        return;
    }
    let mut d = Daemon::tree().start(&[]);
    let pid = d.pid();
    let (peak0, rss0) = rss(pid);
    let baseline = peak0.max(rss0);
    let dir = d.claude().join("proj");
    fs::create_dir_all(&dir).unwrap();

    let mut turns = Vec::new();
    for i in 0..FILES {
        let c = Claude::new();
        let (prompt, turn) = c.prompt("make it big");
        // One line of LINE bytes: the final answer carries the bulk.
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
        // Written outside the tree and renamed in: the file appears whole, so the test
        // measures what a finished line leaves behind, not how many files a fast writer
        // can leave half-read at once.
        let tmp = d.dir.path().join("staging.jsonl");
        append(&tmp, format!("{prompt}{big}").as_bytes());
        fs::rename(&tmp, c.path_in(&dir)).unwrap();
        turns.push(turn);
    }
    d.wait_count("completions", FILES, |e| e["event"] == "turn_completed");
    // Settled: give the daemon a moment past its last read.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (peak, now) = rss(pid);
    let bound = baseline + 2 * LINE as u64;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "baseline {:.1} MiB, peak {:.1} MiB, settled {:.1} MiB, bound {:.1} MiB",
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
