//! Throughput of the sans-IO pipeline (line framing → projection → reduction) on real
//! transcripts held in memory, so only baton's own work is measured.
//! `cargo bench --bench pipeline`; figures in BENCHMARKS.md.

#![allow(clippy::unwrap_used, missing_docs)]

use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::ProviderKind;
use baton::reduce::Reducer;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::Path;

fn corpus_file(rel: &str) -> Option<Vec<u8>> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/corpus")
            .join(rel),
    )
    .ok()
}

fn run(path: &Path, provider: ProviderKind, bytes: &[u8]) -> usize {
    let mut feed = FileFeed::new(path, provider, baton::tail::DEFAULT_MAX_LINE_BYTES);
    let mut reducer = Reducer::new(90_000, 4096);
    let mut out = Vec::new();
    let mut clock = 0i64;
    feed.feed(bytes, |src, obs| {
        if let Some(t) = obs.record_ts {
            clock = clock.max(t);
        }
        reducer.apply(src, obs, Now::virtual_at(clock), &mut out);
    });
    out.len()
}

fn bench(c: &mut Criterion) {
    let cases = [
        (
            "claude/marot__spotter/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
            ProviderKind::Claude,
        ),
        (
            "codex/madshn__localpush/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl",
            ProviderKind::Codex,
        ),
    ];
    let mut group = c.benchmark_group("pipeline");
    for (rel, provider) in cases {
        let Some(bytes) = corpus_file(rel) else {
            eprintln!("NOTICE: ../shared/corpus absent; skipping {rel}");
            continue;
        };
        let path = Path::new(rel);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(provider.as_str(), |b| {
            b.iter(|| black_box(run(path, provider, &bytes)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
