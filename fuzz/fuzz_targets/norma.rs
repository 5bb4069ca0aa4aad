#![no_main]

include!("pipeline.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    run_pipeline(ProviderKind::Norma, "/h/.norma/s/n.jsonl", data);
});
