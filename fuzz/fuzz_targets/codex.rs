#![no_main]

include!("pipeline.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    run_pipeline(
        ProviderKind::Codex,
        "/h/.codex/sessions/2026/01/01/rollout-x.jsonl",
        data,
    );
});
