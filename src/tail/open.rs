//! Opening a transcript to read it.
//!
//! Reading a file updates its access time when that is older than its last change
//! (`relatime`, the usual mount option), and an agent's transcript changes with every
//! append: each read the daemon made of a live session dirtied the inode and cost a
//! journal transaction (`touch_atime` was 1.3 % of the samples of an append's path, on
//! ext4), and a disk write later. Nobody needs the time of baton's reads, so the file is
//! opened with `O_NOATIME`. The kernel allows that only to the file's owner (or a
//! process with `CAP_FOWNER`): for anyone else's file the open is tried again without it.

use rustix::fs::OFlags;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` read-only, leaving its access time alone where the kernel lets us.
pub fn open(path: &Path) -> io::Result<File> {
    let flags = i32::try_from(OFlags::NOATIME.bits()).unwrap_or(0);
    match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => File::open(path),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Read;
    use std::time::{Duration, SystemTime};

    /// A file last read before it was last written: a plain read would move its access
    /// time (under `relatime`, `strictatime`, and the kernel's default); this one leaves
    /// it as it was.
    #[test]
    fn a_read_leaves_the_access_time_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("t.jsonl");
        std::fs::write(&p, b"{\"type\":\"user\"}\n").unwrap();
        let day = Duration::from_secs(86_400);
        let accessed = SystemTime::now() - 2 * day;
        let f = File::options().write(true).open(&p).unwrap();
        f.set_times(
            std::fs::FileTimes::new()
                .set_accessed(accessed)
                .set_modified(SystemTime::now() - day),
        )
        .unwrap();
        drop(f);
        let mut text = String::new();
        open(&p).unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "{\"type\":\"user\"}\n");
        let after = std::fs::metadata(&p).unwrap().accessed().unwrap();
        assert_eq!(after, accessed, "the read moved the access time");
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let e = open(&tmp.path().join("gone.jsonl")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
