// Shared by the projector targets (included, not a module): transcript bytes through the
// real feed (bounded reader, projector) and reducer, cut into chunks the input chooses,
// with the projector's context saved and restored along the way as the daemon does.
// Any panic is a bug; the events must be sane.

use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::{Event, ProviderKind};
use baton::reduce::Reducer;
use std::path::Path;

fn run_pipeline(kind: ProviderKind, path: &str, data: &[u8]) {
    let Some((&cut, data)) = data.split_first() else {
        return;
    };
    // A small line limit so oversized lines are exercised too.
    let max_line = 64 + usize::from(cut) * 16;
    let step = usize::from(cut % 61) + 1;
    let path = Path::new(path);
    let mut feed = FileFeed::new(path, kind, max_line);
    let mut reducer = Reducer::new(90_000, 64);
    let mut out: Vec<Event> = Vec::new();
    let mut clock = 1_000_000i64;
    for (i, chunk) in data.chunks(step).enumerate() {
        feed.feed(chunk, |src, obs| {
            if let Some(t) = obs.record_ts {
                clock = clock.max(t);
            }
            reducer.apply(src, obs, Now::virtual_at(clock), &mut out);
        });
        if i % 7 == 3 {
            // Continue from the saved context, as after a restart.
            let saved = feed.save();
            let at = (feed.reader().offset(), feed.reader().line_no());
            let pending = feed.reader().pos() - at.0;
            if pending == 0
                && let Some(f) = FileFeed::restore(path, kind, max_line, at, &saved)
            {
                feed = f;
            }
        }
    }
    clock += 10_000_000;
    reducer.tick(Now::virtual_at(clock), &mut out);
    for e in &out {
        if let Some(m) = &e.message {
            assert!(m.chars().count() <= baton::model::MESSAGE_MAX_CHARS);
            assert!(
                m.chars().all(|c| !baton::text::is_hidden(c)),
                "unsafe character in message {m:?}"
            );
        }
        assert!(e.line.is_none_or(|l| l >= 1));
    }
}
