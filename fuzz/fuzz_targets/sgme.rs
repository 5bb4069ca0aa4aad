#![no_main]

include!("pipeline.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    run_pipeline(ProviderKind::Sgme, "/h/sgme/raw/sessions/f.md", data);
});
