//! A small tmpfs to run out of space on, and a filler that keeps it full: shared by the
//! disk-trouble tests (`#[path]`-included, next to `mod common`). Mounting needs root (or
//! a user namespace that may mount); where it is refused, tests print why and skip.
#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// A small tmpfs mounted on a directory, unmounted when dropped.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it) on `dir`, or says why not.
    pub fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
            .arg("tmpfs")
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs(dir.to_path_buf()))
    }

    /// Mounts it, or prints why `test` is skipped.
    pub fn mount_or_skip(dir: &Path, size: &str, test: &str) -> Option<Tmpfs> {
        match Tmpfs::mount(dir, size) {
            Ok(t) => Some(t),
            Err(why) => {
                eprintln!("SKIPPED {test}: cannot mount a small tmpfs: {why}");
                None
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Keeps a filesystem full: a file in it grows by whatever room appears, until stopped.
/// Dropping it stops the filling and deletes the file.
pub struct Filler {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    full: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Filler {
    pub fn start(path: PathBuf) -> Filler {
        let stop = Arc::new(AtomicBool::new(false));
        let full = Arc::new(AtomicBool::new(false));
        let (flag, filled) = (Arc::clone(&stop), Arc::clone(&full));
        let p = path.clone();
        let handle = std::thread::spawn(move || {
            let mut f = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)
                .expect("filler");
            let chunk = vec![0x55u8; 4096];
            while !flag.load(Ordering::Relaxed) {
                // Fill to the last page; then look again soon.
                while f.write_all(&chunk).is_ok() {}
                let _ = f.write_all(&chunk[..512]);
                let _ = f.write_all(&chunk[..1]);
                filled.store(true, Ordering::Release);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Filler {
            path,
            stop,
            full,
            handle: Some(handle),
        }
    }

    /// Waits until the filesystem was filled once.
    pub fn wait_full(&self) {
        while !self.full.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops filling and frees the space.
    pub fn free(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let _ = fs::remove_file(&self.path);
    }
}

impl Drop for Filler {
    fn drop(&mut self) {
        self.stop_now();
    }
}
