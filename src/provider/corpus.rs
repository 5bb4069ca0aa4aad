//! Test only: where the real transcripts are (`../shared/corpus`), for the tests that
//! read them from inside the crate.

/// The real transcripts of `agent` (`../shared/corpus/AGENT`, every `.jsonl` below it),
/// sorted; none when the corpus is absent.
pub(crate) fn corpus_files(agent: &str) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/corpus")
            .join(agent),
        &mut out,
    );
    out.sort();
    out
}
