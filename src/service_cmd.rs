//! `baton service install | uninstall | status`: the user unit, through `systemctl --user`.
//!
//! systemctl is run as an argv, never through a shell. Only a unit file this module wrote
//! (its first line is [`MARKER`]) is ever overwritten or removed.

use crate::unit::{self, UnitError};
use clap::{Args, Subcommand};
use std::ffi::OsStr;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const AFTER: &str = "Exit codes: 0 done (for `status`: running), 2 neither XDG_CONFIG_HOME
nor HOME is set, 3 `status`: not running or not installed, 4 cannot write the unit file,
7 no systemd user manager is reachable (no session bus or XDG_RUNTIME_DIR: a container,
or SSH without lingering; `loginctl enable-linger $USER` is the fix), 8 systemctl failed,
or the unit file there is not baton's.";

/// `baton service`.
#[derive(Debug, Args)]
#[command(after_help = AFTER)]
pub struct ServiceArgs {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, Subcommand)]
pub enum Action {
    /// Write ~/.config/systemd/user/baton.service (ExecStart naming this binary), then
    /// `systemctl --user daemon-reload` and `enable --now baton`.
    ///
    /// When the Debian package's unit (/usr/lib/systemd/user/baton.service) is there, it
    /// writes nothing and enables that one. $XDG_CONFIG_HOME replaces ~/.config when
    /// absolute.
    Install {
        /// Replace a baton.service that `baton service install` did not write.
        #[arg(long)]
        force: bool,
    },
    /// `systemctl --user disable --now baton`, remove the unit file `install` wrote (no
    /// other), then `daemon-reload`.
    Uninstall,
    /// Print one line: running or not, enabled or not, and which unit file.
    /// Exits 3 when it is not running.
    Status,
}

/// Runs `baton service ACTION`; the exit code on success (`status` gives 3 when the
/// service is not running).
pub fn main(args: &ServiceArgs, out: &mut impl Write) -> Result<u8, Error> {
    match args.action {
        Action::Install { force } => install(force, out).map(|()| 0),
        Action::Uninstall => uninstall(out).map(|()| 0),
        Action::Status => status(out),
    }
}

/// `baton unit`: the unit `install` would write, without the marker.
pub fn print_unit(out: &mut impl Write) -> Result<(), Error> {
    let text = unit::render(&unit::running_binary()?)?;
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(Error::Output)
}

/// The first line of a unit file `baton service install` wrote.
pub const MARKER: &str =
    "# Written by `baton service install`; `baton service uninstall` removes it.";

const UNIT_NAME: &str = "baton.service";

/// Where the Debian package puts its unit. `BATON_SYSTEM_UNIT_DIR` (absolute) replaces it,
/// for tests only: they cannot write to /usr/lib.
const SYSTEM_UNIT_DIR: &str = "/usr/lib/systemd/user";

const FIX_NO_MANAGER: &str = "Under SSH or in a container there is none until lingering is on: \
     run `loginctl enable-linger $USER` (as root: `loginctl enable-linger NAME`), then log in \
     again; or log in graphically. Then run the command again.";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Unit(#[from] UnitError),
    #[error(
        "cannot tell where the user's systemd units go: neither XDG_CONFIG_HOME nor HOME is an absolute path"
    )]
    NoHome,
    #[error("cannot run systemctl ({0}): `baton service` needs systemd's user manager")]
    NoSystemctl(#[source] io::Error),
    /// No user manager to talk to: no session bus, no XDG_RUNTIME_DIR.
    #[error(
        "no systemd user manager is reachable (`systemctl --user` said: {said}). {FIX_NO_MANAGER}"
    )]
    NoManager { said: String },
    #[error("`systemctl --user {args}` failed ({status}): {said}")]
    Systemctl {
        args: String,
        status: String,
        said: String,
    },
    #[error(
        "{0} was not written by `baton service install`; not touching it (remove it yourself, \
         or pass --force to replace it)"
    )]
    NotOurs(PathBuf),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write the output: {0}")]
    Output(#[source] io::Error),
}

impl Error {
    /// The exit code, as `baton service --help` lists them.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::NoHome => 2,
            Error::Unit(UnitError::Exe(_)) => 3,
            Error::Write { .. } | Error::Output(_) => 4,
            Error::NoSystemctl(_) | Error::NoManager { .. } => 7,
            Error::Unit(UnitError::Unnameable(_)) | Error::Systemctl { .. } | Error::NotOurs(_) => {
                8
            }
        }
    }
}

/// The exit code `status` gives when the service is not running (as for `baton status`).
pub const NOT_RUNNING: u8 = 3;

/// `$XDG_CONFIG_HOME/systemd/user/baton.service` or `~/.config/systemd/user/baton.service`.
pub fn user_unit_path() -> Result<PathBuf, Error> {
    crate::config::env_dir("XDG_CONFIG_HOME")
        .or_else(|| crate::config::env_dir("HOME").map(|h| h.join(".config")))
        .map(|d| d.join("systemd").join("user").join(UNIT_NAME))
        .ok_or(Error::NoHome)
}

/// The package's unit, `/usr/lib/systemd/user/baton.service`.
pub fn system_unit_path() -> PathBuf {
    crate::config::env_dir("BATON_SYSTEM_UNIT_DIR")
        .unwrap_or_else(|| PathBuf::from(SYSTEM_UNIT_DIR))
        .join(UNIT_NAME)
}

/// The unit `install` writes: the marker, then the template naming `bin`.
pub fn user_unit(bin: &Path) -> Result<String, Error> {
    Ok(format!("{MARKER}\n{}", unit::render(bin)?))
}

/// What is at `path`: nothing, a file we wrote, or someone else's.
#[derive(Debug, PartialEq)]
enum Found {
    Nothing,
    Ours,
    Theirs,
}

fn found(path: &Path) -> Found {
    match std::fs::read_to_string(path) {
        Ok(text) if text.lines().next() == Some(MARKER) => Found::Ours,
        Ok(_) => Found::Theirs,
        // Unreadable or not UTF-8: not ours either.
        Err(e) if e.kind() != io::ErrorKind::NotFound => Found::Theirs,
        Err(_) if path.symlink_metadata().is_ok() => Found::Theirs,
        Err(_) => Found::Nothing,
    }
}

/// `baton service install`.
pub fn install(force: bool, out: &mut impl Write) -> Result<(), Error> {
    let user = user_unit_path()?;
    let system = system_unit_path();
    if system.exists() {
        // A unit in ~/.config shadows the package's: drop ours, leave theirs be.
        match found(&user) {
            Found::Ours => {
                remove(&user)?;
                say(
                    out,
                    &format!(
                        "Removed {} (the package's unit replaces it).",
                        user.display()
                    ),
                )?;
            }
            Found::Theirs => say(
                out,
                &format!("Note: {} overrides the package's unit.", user.display()),
            )?,
            Found::Nothing => {}
        }
        say(
            out,
            &format!("Using the package's unit {}.", system.display()),
        )?;
        systemctl(&["daemon-reload"])?;
    } else {
        let before = found(&user);
        if before == Found::Theirs && !force {
            return Err(Error::NotOurs(user));
        }
        let bin = unit::running_binary()?;
        write_atomically(&user, user_unit(&bin)?.as_bytes())?;
        if let Err(e) = systemctl(&["daemon-reload"]) {
            if before == Found::Nothing {
                // Nothing can use the unit here (no user manager): leave nothing behind.
                let _ = std::fs::remove_file(&user);
                say(
                    out,
                    &format!("Nothing installed: {} removed again.", user.display()),
                )?;
            }
            return Err(e);
        }
        say(
            out,
            &format!(
                "Wrote {} (ExecStart={} run).",
                user.display(),
                unit::exec_path(&bin)?
            ),
        )?;
    }
    systemctl(&["enable", "--now", UNIT_NAME])?;
    say(
        out,
        "Enabled and started baton.service; `baton service status` tells how it runs.",
    )
}

/// `baton service uninstall`.
pub fn uninstall(out: &mut impl Write) -> Result<(), Error> {
    let user = user_unit_path()?;
    let mine = found(&user);
    if mine == Found::Nothing && !system_unit_path().exists() {
        return say(
            out,
            &format!("Not installed: there is no {}.", user.display()),
        );
    }
    systemctl(&["disable", "--now", UNIT_NAME])?;
    match mine {
        Found::Ours => {
            remove(&user)?;
            say(out, &format!("Removed {}.", user.display()))?;
        }
        Found::Theirs => say(
            out,
            &format!(
                "Left {} in place: `baton service install` did not write it.",
                user.display()
            ),
        )?,
        Found::Nothing => {}
    }
    systemctl(&["daemon-reload"])?;
    say(out, "Stopped and disabled baton.service.")
}

/// `baton service status`: one line; `Ok(NOT_RUNNING)` when it is not active.
pub fn status(out: &mut impl Write) -> Result<u8, Error> {
    let props = systemctl(&[
        "show",
        UNIT_NAME,
        "--property=LoadState,ActiveState,SubState,UnitFileState,FragmentPath",
    ])?;
    let get = |key: &str| {
        props
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or("")
    };
    if get("LoadState") == "not-found" || get("FragmentPath").is_empty() {
        say(
            out,
            "baton service: not installed (`baton service install` installs it).",
        )?;
        return Ok(NOT_RUNNING);
    }
    let active = get("ActiveState");
    let mut line = format!(
        "baton service: {active} ({}), {}, unit {}",
        get("SubState"),
        or_unknown(get("UnitFileState")),
        get("FragmentPath"),
    );
    if active != "active" {
        line.push_str("; see `journalctl --user -u baton`");
    }
    say(out, &line)?;
    Ok(if active == "active" { 0 } else { NOT_RUNNING })
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "unknown" } else { s }
}

/// Runs `systemctl --user ARGS` and returns its stdout.
fn systemctl(args: &[&str]) -> Result<String, Error> {
    let output = Command::new("systemctl")
        .arg("--user")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(Error::NoSystemctl)?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let said = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    // "Failed to connect to bus: No medium found", or (newer systemd) "Failed to connect to
    // user scope bus via local transport: $DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR
    // not defined".
    // With a session bus but no systemd on it: "… org.freedesktop.systemd1 was not
    // provided by any .service files"; in a container: "System has not been booted with
    // systemd as init system (PID 1)".
    if (said.contains("Failed to connect to") && said.contains("bus"))
        || said.contains("org.freedesktop.systemd1 was not provided")
        || said.contains("not been booted with systemd")
    {
        return Err(Error::NoManager { said });
    }
    Err(Error::Systemctl {
        args: args.join(" "),
        status: output.status.to_string(),
        said,
    })
}

/// Written whole or not at all: a unit half written would fail to load.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let err = |source| Error::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(err)?;
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(OsStr::new(".tmp"));
    let tmp = PathBuf::from(tmp_name);
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err(e)
        })
}

fn remove(path: &Path) -> Result<(), Error> {
    std::fs::remove_file(path).map_err(|source| Error::Write {
        path: path.to_owned(),
        source,
    })
}

fn say(out: &mut impl Write, line: &str) -> Result<(), Error> {
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(Error::Output)
}
