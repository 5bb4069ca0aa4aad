//! Read buffers kept per thread, one per use, so reading a file allocates nothing.
//!
//! A fresh zeroed buffer per read costs more than it seems: the allocator hands out a
//! zeroed block of this size by giving its pages back and faulting them in again, so
//! every file read (a scan reads thousands; the daemon reads on every change) paid page
//! faults for its buffer before copying a byte.

use std::cell::RefCell;

/// What a buffer is for: uses that can be active at once get their own.
#[derive(Clone, Copy)]
pub enum Use {
    /// Forward reads of a file's bytes into the line reader.
    Read,
    /// Backward chunks while looking for a file's last turn.
    Back,
    /// Forward chunks while counting a file's lines.
    Count,
}

thread_local! {
    static BUFS: [RefCell<Vec<u8>>; 3] = const {
        [RefCell::new(Vec::new()), RefCell::new(Vec::new()), RefCell::new(Vec::new())]
    };
}

/// Runs `f` with this thread's buffer for `what`, at least `len` bytes long (contents
/// unspecified). A nested call for the same use gets a fresh buffer.
pub fn with<T>(what: Use, len: usize, f: impl FnOnce(&mut [u8]) -> T) -> T {
    BUFS.with(|bufs| match bufs[what as usize].try_borrow_mut() {
        Ok(mut buf) => {
            if buf.len() < len {
                buf.resize(len, 0);
            }
            f(&mut buf[..len])
        }
        Err(_) => f(&mut vec![0u8; len]),
    })
}

/// Gives back this thread's buffer for `what` (the next use allocates it again): for a
/// use that a burst needed and steady work does not. [`Use::Back`] gives back the kept
/// chunks too.
pub fn release(what: Use) {
    BUFS.with(|bufs| {
        if let Ok(mut buf) = bufs[what as usize].try_borrow_mut() {
            *buf = Vec::new();
        }
    });
    if matches!(what, Use::Back) {
        SPARE.with(|spare| {
            if let Ok(mut spare) = spare.try_borrow_mut() {
                *spare = Vec::new();
            }
        });
    }
}

/// Buffers that outlive a call (a file's kept tail, handed to its parse), taken back
/// when dropped: up to this many wait per thread for the next file.
const SPARE_MAX: usize = 2;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of at least the length asked for (contents unspecified) that goes back to
/// its thread's spares when dropped. Reused, it costs neither zeroing nor fresh pages:
/// a fresh buffer per chunk of `scan`'s backward reads came with five times the page
/// faults.
pub struct Owned {
    buf: Vec<u8>,
}

impl Owned {
    /// A spare at least `len` bytes long (its whole length), else a new buffer of `len`.
    pub fn at_least(len: usize) -> Self {
        let spare = SPARE.with(|s| {
            let mut s = s.try_borrow_mut().ok()?;
            let i = s.iter().position(|b| b.len() >= len)?;
            Some(s.swap_remove(i))
        });
        Owned {
            buf: spare.unwrap_or_else(|| vec![0; len]),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        let _ = SPARE.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                s.push(buf);
                // The largest stay.
                s.sort_by_key(|b| std::cmp::Reverse(b.len()));
                s.truncate(SPARE_MAX);
            }
        });
    }
}

impl std::fmt::Debug for Owned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Owned({} bytes)", self.buf.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_reused_and_a_nested_use_gets_its_own() {
        let first = with(Use::Read, 16, |b| {
            b[0] = 7;
            b.as_ptr() as usize
        });
        let again = with(Use::Read, 8, |b| {
            // Same memory, contents left as they were.
            assert_eq!(b[0], 7);
            with(Use::Read, 8, |inner| {
                assert_ne!(inner.as_ptr(), b.as_ptr());
            });
            b.as_ptr() as usize
        });
        assert_eq!(first, again);
    }

    #[test]
    fn an_owned_buffer_goes_back_to_the_spares_when_dropped() {
        let mut a = Owned::at_least(32);
        a.bytes_mut()[0] = 9;
        let at = a.bytes().as_ptr() as usize;
        drop(a);
        let b = Owned::at_least(16);
        assert_eq!(b.bytes().len(), 32, "the spare, whole");
        assert_eq!(b.bytes().as_ptr() as usize, at, "the spare is reused");
        let c = Owned::at_least(16);
        assert_ne!(
            c.bytes().as_ptr() as usize,
            at,
            "a buffer in use is not handed out"
        );
        assert_eq!(c.bytes().len(), 16);
        drop(b);
        assert_eq!(
            Owned::at_least(64).bytes().len(),
            64,
            "a spare too short is not used"
        );
    }
}
