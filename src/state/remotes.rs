//! Where each `[[remote]]` stands: `remote-<name>.json` holds the last event id handed on
//! and the ids handed on just before it, written atomically (a temporary file, fsync,
//! rename) after each batch was handed on.

use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteMark {
    /// Resumed after with `--since-id`.
    pub last: Option<String>,
    /// Dropped if they come again (a remote that lost its ring sends what it holds).
    #[serde(default)]
    pub recent: Vec<String>,
}

/// `name` is a validated `[[remote]]` name: letters, digits, `.`, `_`, `-`.
fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("remote-{name}.json"))
}

/// The saved mark; none when there is no file, or an unreadable one (said in the log:
/// the remote then sends what it holds, and nothing already handed on is known).
pub fn load(dir: &Path, name: &str) -> RemoteMark {
    super::load_json(
        &path(dir, name),
        "remote mark",
        "starting that remote afresh",
    )
}

pub fn save(dir: &Path, name: &str, mark: &RemoteMark) -> io::Result<()> {
    let bytes = serde_json::to_vec(mark).map_err(io::Error::other)?;
    let file = format!("remote-{name}.json");
    super::store::write_atomic(dir, &file, &format!("{file}.tmp"), &bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::fs;

    #[test]
    fn a_mark_round_trips_and_a_torn_one_reads_as_none() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(load(d.path(), "box"), RemoteMark::default());
        let m = RemoteMark {
            last: Some("b".to_owned()),
            recent: vec!["a".to_owned(), "b".to_owned()],
        };
        save(d.path(), "box", &m).unwrap();
        assert_eq!(load(d.path(), "box"), m);
        fs::write(d.path().join("remote-box.json"), b"{\"last\":").unwrap();
        assert_eq!(load(d.path(), "box"), RemoteMark::default());
    }
}
