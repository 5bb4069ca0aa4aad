#![no_main]

include!("pipeline.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    run_pipeline(ProviderKind::Claude, "/h/.claude/projects/p/s.jsonl", data);
});
