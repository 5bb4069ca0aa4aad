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
/// use that a burst needed and steady work does not.
pub fn release(what: Use) {
    BUFS.with(|bufs| {
        if let Ok(mut buf) = bufs[what as usize].try_borrow_mut() {
            *buf = Vec::new();
        }
    });
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
}
