//! A tracked file's path, held once.
//!
//! At 10,000 files the path was kept twice, about 110 bytes each time: as the file
//! table's key, and as the copy the file's projector made, which the reducer's sessions
//! and views went on holding after the projector was gone (1.3 MB). The table's key now
//! holds the name as an `Arc<str>`, and the core hands that same name to the reducer
//! with every read ([`super::files::Files::shared_name`]) and every park
//! ([`super::files::Files::name`]), so every holder shares one allocation. Each feed
//! is made with it too ([`crate::feed::FileFeed::resume_named`]), the history readers'
//! included: at 100,000 files, the copies they made and dropped during the history read
//! left as many holes among the names kept (RSS −5 MiB without them).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

/// A path, and the name (its text) the rest of the daemon knows it by. 16 bytes: it
/// is the file table's key, and a slot of that map holds one whether used or not (at
/// 117,758 files the map has 262,144 slots; with the 32-byte key it had, they took
/// 10.7 MB).
#[derive(Debug, Clone)]
pub(super) enum FileName {
    /// A UTF-8 path: its text is its name.
    Text(Arc<str>),
    /// A path that is not UTF-8, whose name is a lossy copy (rare; then the key costs
    /// one more allocation).
    Raw(Arc<(Arc<str>, Box<Path>)>),
}

const _: () = assert!(size_of::<FileName>() == 16);

impl FileName {
    pub fn new(path: &Path) -> FileName {
        match path.to_str() {
            Some(s) => FileName::Text(Arc::from(s)),
            None => FileName::Raw(Arc::new((
                Arc::from(path.to_string_lossy().as_ref()),
                path.into(),
            ))),
        }
    }

    pub fn name(&self) -> &Arc<str> {
        match self {
            FileName::Text(name) => name,
            FileName::Raw(raw) => &raw.0,
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            FileName::Text(name) => Path::new(&**name),
            FileName::Raw(raw) => &raw.1,
        }
    }
}

impl Deref for FileName {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.path()
    }
}

// A map keyed by `FileName` is looked up with a `&Path`: hash and equality are the
// path's, as `Borrow` requires.
impl Borrow<Path> for FileName {
    fn borrow(&self) -> &Path {
        self.path()
    }
}

impl Hash for FileName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.path().hash(state);
    }
}

impl PartialEq for FileName {
    fn eq(&self, other: &FileName) -> bool {
        self.path() == other.path()
    }
}

impl Eq for FileName {}

#[cfg(test)]
mod tests {
    use super::super::files::Files;
    use super::super::first::Admit;
    use super::super::read::Mode;
    use super::*;
    use std::collections::HashMap;
    use std::ffi::OsStr;
    use std::fs;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_table_keyed_by_name_is_looked_up_by_path() {
        let mut m = HashMap::new();
        let utf8 = Path::new("/t/a b/ünï.jsonl");
        let raw = Path::new(OsStr::from_bytes(b"/t/\xff\xfe.jsonl"));
        m.insert(FileName::new(utf8), 1);
        m.insert(FileName::new(raw), 2);
        assert_eq!(m.get(utf8), Some(&1));
        assert_eq!(m.get(raw), Some(&2));
        // The lossy name of the non-UTF-8 path is not that path.
        assert_eq!(m.get(Path::new("/t/\u{fffd}\u{fffd}.jsonl")), None);
        let (k, _) = m.get_key_value(raw).unwrap();
        assert_eq!(&**k.name(), "/t/\u{fffd}\u{fffd}.jsonl");
        assert_eq!(k.path(), raw);
        let (k, _) = m.get_key_value(utf8).unwrap();
        assert_eq!(&**k.name(), "/t/a b/ünï.jsonl");
        assert_eq!(&**k, utf8);
    }

    fn files(root: &Path) -> Files {
        Files::for_test(root, 0)
    }

    #[test]
    fn a_tracked_file_has_one_name_for_every_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("projects").join("p").join("s.jsonl");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, b"{\"type\":\"user\"}\n").unwrap();
        let meta = fs::metadata(&path).unwrap();
        let mut f = files(&dir.path().join("projects"));
        let before = f.name(&path);
        assert!(!matches!(
            f.admit(&path, &meta, Mode::Live, false),
            Admit::Skip
        ));
        // The table's name is the one its projector was made with: no copy.
        let name = f.name(&path);
        assert_eq!(*name, *before);
        assert!(!Arc::ptr_eq(&name, &before));
        let t = f.tracked(&path).unwrap();
        assert!(Arc::ptr_eq(&t.feed.as_ref().unwrap().path, &name));
        assert!(Arc::ptr_eq(&f.shared_name(before.clone()), &name));
        assert!(Arc::ptr_eq(&f.name(&path), &name));
        // Not tracked: the name given is kept.
        let other: Arc<str> = Arc::from("/elsewhere/s.jsonl");
        assert!(Arc::ptr_eq(&f.shared_name(other.clone()), &other));
    }
}
