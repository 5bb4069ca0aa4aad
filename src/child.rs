//! A program baton starts itself (an exec hook's run, a remote link's `ssh`): started
//! directly, never through a shell, as the leader of a process group of its own, so that
//! ending the group ends whatever it started; waited for against a deadline; and its
//! group ended with SIGTERM, then SIGKILL after a grace.

use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How the child's three standard streams are wired.
pub struct Wiring {
    pub stdin: Stdio,
    pub stdout: Stdio,
    pub stderr: Stdio,
}

/// Starts `argv[0]` with the rest of `argv` as its arguments and `env` added to baton's
/// environment, wired as `wiring` says, in a process group of its own. `argv` must not be
/// empty.
pub fn start(argv: &[String], env: &[(&str, &str)], wiring: Wiring) -> io::Result<Child> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.stdin(wiring.stdin)
        .stdout(wiring.stdout)
        .stderr(wiring.stderr)
        // A group of its own, so that ending it ends what it started.
        .process_group(0)
        .spawn()
}

/// The child's exit status, or `None` if it is still running at `deadline` (or when
/// `stop` is set).
pub fn wait_for(
    child: &mut Child,
    deadline: Instant,
    stop: Option<&AtomicBool>,
) -> io::Result<Option<ExitStatus>> {
    let mut nap = Duration::from_millis(2);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if now >= deadline || stop.is_some_and(|s| s.load(Ordering::Acquire)) {
            return Ok(None);
        }
        thread::sleep(nap.min(deadline - now));
        nap = (nap * 2).min(Duration::from_millis(100));
    }
}

/// What [`end_group`] does once the leader has gone within the grace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rest {
    /// The rest of the group gets what is left of the grace to end too, then SIGKILL.
    Grace,
    /// The rest of the group gets SIGKILL at once.
    Kill,
}

/// SIGKILL to the child's process group (what is left of it).
pub fn kill_group(child: &Child) {
    if let Some(pgid) = group_of(child) {
        let _ = kill_process_group(pgid, Signal::KILL);
    }
}

/// Ends the child and its process group: SIGTERM to the group, SIGKILL after `grace`
/// to whatever is left of it (sooner after the leader with [`Rest::Kill`]), and the
/// leader reaped. Returns how the leader ended.
pub fn end_group(child: &mut Child, grace: Duration, rest: Rest) -> io::Result<ExitStatus> {
    let Some(pgid) = group_of(child) else {
        let _ = child.kill();
        return child.wait();
    };
    let _ = kill_process_group(pgid, Signal::TERM);
    let grace_end = Instant::now() + grace;
    // While the leader is not reaped its pid, and so the group's id, cannot be taken by
    // another process; after, the kernel keeps it while any member of the group lives.
    let reaped = wait_for(child, grace_end, None).ok().flatten();
    if rest == Rest::Grace {
        while Instant::now() < grace_end && test_kill_process_group(pgid).is_ok() {
            thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = kill_process_group(pgid, Signal::KILL);
    match reaped {
        Some(status) => Ok(status),
        None => {
            let _ = child.kill();
            child.wait()
        }
    }
}

fn group_of(child: &Child) -> Option<Pid> {
    i32::try_from(child.id()).ok().and_then(Pid::from_raw)
}
