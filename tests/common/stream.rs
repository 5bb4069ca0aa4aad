//! A stream of turns written while the daemon runs, and the tally of what came out:
//! shared by the state tests (`#[path]`-included, next to `mod common`).
#![allow(dead_code)]

use crate::common::{Claude, Codex, DEADLINE, Daemon, append};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// xorshift64*: random moments without a dependency; the seed is printed.
pub struct Rng(u64);

impl Rng {
    pub fn seeded() -> Rng {
        let seed = std::env::var("BATON_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .expect("clock")
                    .as_nanos() as u64
                    | 1
            });
        eprintln!("seed: {seed} (BATON_TEST_SEED to repeat)");
        Rng(seed)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// A writer appending whole turns to a few Claude and Codex files (and now and then
/// starting a new Claude file) until stopped. Returns every turn id it wrote.
pub struct Stream {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<String>>,
}

impl Stream {
    pub fn start(claude: PathBuf, codex: PathBuf) -> Stream {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut turns = Vec::new();
            let mut claudes = vec![Claude::new(), Claude::new()];
            let x = Codex::new();
            let xpath = x.path_in(&codex);
            append(&xpath, x.meta().as_bytes());
            let mut i = 0u64;
            while !flag.load(Ordering::Relaxed) {
                i += 1;
                if i.is_multiple_of(3) {
                    let (bytes, turn) = x.turn(&format!("codex answer {i}"));
                    append(&xpath, bytes.as_bytes());
                    turns.push(turn);
                } else {
                    if i.is_multiple_of(40) {
                        claudes.remove(0);
                        claudes.push(Claude::new());
                    }
                    let c = &claudes[(i % 2) as usize];
                    let (bytes, turn) = c.turn(&format!("prompt {i}"), &format!("answer {i}"));
                    append(&c.path_in(&claude), bytes.as_bytes());
                    turns.push(turn);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            turns
        });
        Stream { stop, handle }
    }

    pub fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("writer thread")
    }
}

/// Waits until every turn has a `turn_completed`.
pub fn wait_all_completed(d: &Daemon, turns: &[String]) {
    let start = Instant::now();
    loop {
        let done: HashSet<String> = d
            .events()
            .iter()
            .filter(|e| e["event"] == "turn_completed")
            .filter_map(|e| e["turn"].as_str().map(str::to_owned))
            .collect();
        let missing: Vec<&String> = turns.iter().filter(|t| !done.contains(*t)).collect();
        if missing.is_empty() {
            return;
        }
        if start.elapsed() > DEADLINE * 2 {
            d.fail(&format!(
                "{} of {} turns never completed, e.g. {:?}",
                missing.len(),
                turns.len(),
                &missing[..missing.len().min(5)]
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[derive(Debug, Default, PartialEq)]
pub struct Tally {
    pub turns: usize,
    pub lost: usize,
    /// Deliveries of an id beyond its first.
    pub duplicates: usize,
    /// Of those, deliveries without `replay: true`.
    pub plain_duplicates: usize,
    pub replays: usize,
}

pub fn tally(events: &[Value], turns: &[String]) -> Tally {
    let mut t = Tally {
        turns: turns.len(),
        ..Tally::default()
    };
    let completed: HashSet<&str> = events
        .iter()
        .filter(|e| e["event"] == "turn_completed")
        .filter_map(|e| e["turn"].as_str())
        .collect();
    t.lost = turns
        .iter()
        .filter(|x| !completed.contains(x.as_str()))
        .count();
    let mut by_id: HashMap<&str, (usize, usize)> = HashMap::new();
    for e in events.iter().filter(|e| !e["provider"].is_null()) {
        let replay = e["replay"] == true;
        let entry = by_id
            .entry(e["id"].as_str().unwrap_or_default())
            .or_default();
        if replay {
            entry.1 += 1;
            t.replays += 1;
        } else {
            entry.0 += 1;
        }
    }
    for (plain, replay) in by_id.values() {
        t.duplicates += (plain + replay).saturating_sub(1);
        t.plain_duplicates += plain.saturating_sub(1);
    }
    t
}
