//! The systemd user unit: `baton unit` prints the file byte for byte, and
//! `systemd-analyze verify` accepts it.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_baton");
const UNIT_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/systemd/baton.service");
const EXEC_START: &str = "ExecStart=%h/.cargo/bin/baton run";

fn unit_file() -> String {
    std::fs::read_to_string(UNIT_PATH).expect("systemd/baton.service is readable")
}

#[test]
fn unit_command_prints_the_file_exactly() {
    let out = Command::new(BIN).arg("unit").output().expect("baton runs");
    assert!(out.status.success(), "baton unit failed: {out:?}");
    assert!(
        out.stdout == unit_file().as_bytes(),
        "`baton unit` drifted from systemd/baton.service"
    );
}

#[test]
fn unit_has_the_promised_settings() {
    let unit = unit_file();
    for line in [
        "Type=notify",
        "NotifyAccess=main",
        EXEC_START,
        "Restart=on-failure",
        "After=graphical-session.target",
        "PartOf=graphical-session.target",
        "WantedBy=graphical-session.target",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=%S/baton %t/baton",
        "PrivateTmp=yes",
    ] {
        assert!(unit.lines().any(|l| l == line), "unit lacks `{line}`");
    }
    assert!(unit.lines().any(|l| l.starts_with("WatchdogSec=")));
    // Transcripts live in the home directory: hiding it would blind the daemon.
    assert!(!unit.lines().any(|l| l.starts_with("ProtectHome=")));
}

fn have(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok()
}

/// A copy of the unit in a temp dir, ExecStart pointing at the binary under test, and a
/// private runtime directory for the user manager `systemd-analyze --user` simulates.
fn copy_for_verify(dir: &Path, edit: impl Fn(String) -> String) -> (std::path::PathBuf, Output) {
    let unit = unit_file();
    assert!(
        unit.lines().any(|l| l == EXEC_START),
        "ExecStart changed: update this test"
    );
    let copy = edit(unit.replace(EXEC_START, &format!("ExecStart={BIN} run")));
    let path = dir.join("baton.service");
    std::fs::write(&path, copy).expect("write unit copy");
    let runtime = dir.join("runtime");
    std::fs::create_dir_all(&runtime).expect("runtime dir");
    let out = Command::new("systemd-analyze")
        .args(["verify", "--user", "--man=no"])
        .arg(&path)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze runs");
    (path, out)
}

/// `systemd-analyze verify` checks that ExecStart's program exists and is executable, and
/// `%h/.cargo/bin/baton` need not exist where tests run. So it verifies a copy whose
/// ExecStart names the binary under test; every other line is the file's own.
#[test]
fn systemd_analyze_verifies_the_unit() {
    if !have("systemd-analyze") {
        eprintln!("notice: systemd-analyze not found; skipping the unit verification");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, out) = copy_for_verify(dir.path(), |u| u);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("systemd-analyze verify --user: {}\n{text}", out.status);
    assert!(
        out.status.success(),
        "systemd-analyze verify failed:\n{text}"
    );
    // Unknown keys and bad values are only warnings (exit 0): fail on any about the unit.
    assert!(
        !text.lines().any(|l| l.contains("baton.service")),
        "systemd-analyze complained:\n{text}"
    );
}

/// The check above must be able to fail: a misspelt key is reported.
#[test]
fn systemd_analyze_reports_a_bad_key() {
    if !have("systemd-analyze") {
        eprintln!("notice: systemd-analyze not found; skipping");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, out) = copy_for_verify(dir.path(), |u| u.replace("WatchdogSec=", "WatchdogSecs="));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("baton.service") && stderr.contains("WatchdogSecs"),
        "not reported: {stderr}"
    );
}
