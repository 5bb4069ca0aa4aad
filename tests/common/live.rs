//! A file being written while baton follows it, in-process: appends are read from the
//! feed's own position, as the daemon does, with a virtual clock taken from record time.

use baton::clock::Now;
use baton::feed::FileFeed;
use baton::model::{Event, ProviderKind};
use baton::reduce::Reducer;
use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub struct Live {
    pub path: PathBuf,
    pub feed: FileFeed,
    pub reducer: Reducer,
    pub clock: i64,
}

impl Live {
    pub fn new(dir: &Path, name: &str, provider: ProviderKind) -> Self {
        let path = dir.join(name);
        std::fs::write(&path, b"").expect("create");
        Live {
            feed: FileFeed::new(&path, provider, baton::tail::DEFAULT_MAX_LINE_BYTES),
            path,
            reducer: Reducer::new(super::SETTLE_MS, 1024),
            clock: 0,
        }
    }

    pub fn append(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut f = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .expect("open");
        f.write_all(bytes).expect("append");
        self.read()
    }

    pub fn read(&mut self) -> Vec<Event> {
        let mut f = std::fs::File::open(&self.path).expect("open");
        f.seek(SeekFrom::Start(self.feed.reader().pos()))
            .expect("seek");
        let mut out = Vec::new();
        let (reducer, clock) = (&mut self.reducer, &mut self.clock);
        self.feed
            .read_to_end(&mut f, |src, obs| {
                if let Some(t) = obs.record_ts {
                    *clock = (*clock).max(t);
                }
                reducer.apply(src, obs, Now::virtual_at(*clock), &mut out);
            })
            .expect("read");
        out
    }
}
