//! The systemd user unit: `baton unit` prints the template (systemd/baton.service) with
//! ExecStart naming the running binary, and `systemd-analyze verify` accepts it.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_baton");
const UNIT_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/systemd/baton.service");
const EXEC_START: &str = "ExecStart=%h/.cargo/bin/baton run";

fn unit_file() -> String {
    std::fs::read_to_string(UNIT_PATH).expect("systemd/baton.service is readable")
}

fn baton_unit(bin: &Path) -> String {
    let out = Command::new(bin).arg("unit").output().expect("baton runs");
    assert!(out.status.success(), "baton unit failed: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Every line the template's, but ExecStart, which names the binary's real path (a
/// symlink resolved) so the unit works wherever baton was installed.
#[test]
fn unit_command_prints_the_template_naming_the_running_binary() {
    let real = Path::new(BIN).canonicalize().expect("canonical path");
    let expected = unit_file().replace(EXEC_START, &format!("ExecStart={} run", real.display()));
    assert_eq!(baton_unit(Path::new(BIN)), expected);

    let dir = tempfile::tempdir().expect("tempdir");
    let link = dir.path().join("baton");
    std::os::unix::fs::symlink(BIN, &link).expect("symlink");
    assert_eq!(baton_unit(&link), expected);
}

/// A path with a space and a `%` (a specifier to systemd) still names the binary: quoted
/// and escaped, as `systemd-analyze verify` confirms.
#[test]
fn unit_command_quotes_an_awkward_path() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let sub = dir.path().join("my tools %n");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let bin = sub.join("baton");
    // Same filesystem as the build (CARGO_TARGET_TMPDIR): a hard link, not a copy.
    std::fs::hard_link(BIN, &bin).expect("hard link");
    let unit = baton_unit(&bin);
    let real = bin.canonicalize().expect("canonical path");
    let line = format!(
        "ExecStart=\"{}\" run",
        real.display().to_string().replace('%', "%%")
    );
    assert!(unit.lines().any(|l| l == line), "no `{line}` in:\n{unit}");
    if !have("systemd-analyze") {
        eprintln!("notice: systemd-analyze not found; skipping the unit verification");
        return;
    }
    let out = verify(dir.path(), &unit);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "systemd-analyze verify failed:\n{text}"
    );
    assert!(!text.contains("baton.service"), "complained:\n{text}");
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

/// `unit` written as baton.service in `dir`, verified with a private runtime directory for
/// the user manager `systemd-analyze --user` simulates.
fn verify(dir: &Path, unit: &str) -> Output {
    let path = dir.join("baton.service");
    std::fs::write(&path, unit).expect("write unit copy");
    let runtime = dir.join("runtime");
    std::fs::create_dir_all(&runtime).expect("runtime dir");
    Command::new("systemd-analyze")
        .args(["verify", "--user", "--man=no"])
        .arg(&path)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze runs")
}

/// `systemd-analyze verify` checks that ExecStart's program exists and is executable:
/// `baton unit`'s output passes as it is, since it names the binary under test.
#[test]
fn systemd_analyze_verifies_the_unit() {
    if !have("systemd-analyze") {
        eprintln!("notice: systemd-analyze not found; skipping the unit verification");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let out = verify(dir.path(), &baton_unit(Path::new(BIN)));
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
    let unit = baton_unit(Path::new(BIN)).replace("WatchdogSec=", "WatchdogSecs=");
    let out = verify(dir.path(), &unit);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("baton.service") && stderr.contains("WatchdogSecs"),
        "not reported: {stderr}"
    );
}
