//! `baton service install | uninstall | status`, run as the real binary against a fake
//! `systemctl` on PATH that records its argv (and whether the unit file exists at that
//! moment), in a temporary HOME and XDG_CONFIG_HOME.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_baton");
const TEMPLATE: &str = include_str!("../systemd/baton.service");
const TEMPLATE_EXEC_START: &str = "ExecStart=%h/.cargo/bin/baton run";
const MARKER: &str = "# Written by `baton service install`; `baton service uninstall` removes it.";

/// Prints `FAKE_SHOW` for `show`; with `FAKE_FAIL` set, prints it to stderr and exits 1.
const FAKE_SYSTEMCTL: &str = r#"#!/bin/sh
line=$(printf '%s ' "$@")
if [ -e "$XDG_CONFIG_HOME/systemd/user/baton.service" ]; then state=present; else state=absent; fi
printf '%s| unit %s\n' "$line" "$state" >> "$FAKE_LOG"
if [ -n "$FAKE_FAIL" ]; then printf '%s\n' "$FAKE_FAIL" >&2; exit 1; fi
if [ "$2" = show ]; then printf '%s\n' "$FAKE_SHOW"; fi
exit 0
"#;

struct Env {
    dir: tempfile::TempDir,
    fail: Option<String>,
    show: String,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let fake = bin.join("systemctl");
        std::fs::write(&fake, FAKE_SYSTEMCTL).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Env {
            dir,
            fail: None,
            show: String::new(),
        }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    fn unit(&self) -> PathBuf {
        self.config().join("systemd/user/baton.service")
    }

    /// Where the package's unit would be (empty unless a test puts one there).
    fn system_dir(&self) -> PathBuf {
        self.dir.path().join("usr-lib-systemd-user")
    }

    fn run(&self, args: &[&str]) -> Output {
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("PATH", path)
            .env("HOME", self.dir.path().join("home"))
            .env("XDG_CONFIG_HOME", self.config())
            .env("BATON_SYSTEM_UNIT_DIR", self.system_dir())
            .env("FAKE_LOG", self.dir.path().join("systemctl.log"))
            .env("FAKE_SHOW", &self.show);
        match &self.fail {
            Some(f) => cmd.env("FAKE_FAIL", f),
            None => cmd.env_remove("FAKE_FAIL"),
        };
        cmd.output().unwrap()
    }

    /// The systemctl calls so far, one line each.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("systemctl.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn real_bin() -> PathBuf {
    Path::new(BIN).canonicalize().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[track_caller]
fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "{:?}\nstdout: {}\nstderr: {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn install_writes_the_unit_naming_this_binary_then_reloads_and_enables() {
    let env = Env::new();
    let out = env.run(&["service", "install"]);
    ok(&out);
    let unit = std::fs::read_to_string(env.unit()).unwrap();
    let exec = format!("ExecStart={} run", real_bin().display());
    assert_eq!(
        unit,
        format!("{MARKER}\n{}", TEMPLATE.replace(TEMPLATE_EXEC_START, &exec))
    );
    assert_eq!(
        env.calls(),
        [
            "--user daemon-reload | unit present",
            "--user enable --now baton.service | unit present",
        ]
    );
    assert!(text(&out.stdout).contains(&exec), "{}", text(&out.stdout));
}

#[test]
fn a_relative_xdg_config_home_counts_as_unset() {
    let env = Env::new();
    let out = Command::new(BIN)
        .args(["service", "install"])
        .env(
            "PATH",
            format!(
                "{}:{}",
                env.dir.path().join("bin").display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("HOME", env.dir.path().join("home"))
        .env("XDG_CONFIG_HOME", "relative/config")
        .env("BATON_SYSTEM_UNIT_DIR", env.system_dir())
        .env("FAKE_LOG", env.dir.path().join("systemctl.log"))
        .current_dir(env.dir.path())
        .output()
        .unwrap();
    ok(&out);
    assert!(
        env.dir
            .path()
            .join("home/.config/systemd/user/baton.service")
            .is_file()
    );
    assert!(!env.dir.path().join("relative").exists());
}

#[test]
fn uninstall_stops_then_removes_the_unit_it_wrote() {
    let env = Env::new();
    ok(&env.run(&["service", "install"]));
    let out = env.run(&["service", "uninstall"]);
    ok(&out);
    assert!(!env.unit().exists());
    assert_eq!(
        env.calls()[2..],
        [
            "--user disable --now baton.service | unit present",
            "--user daemon-reload | unit absent",
        ]
    );
    // Nothing left to do: says so, calls nothing.
    let out = env.run(&["service", "uninstall"]);
    ok(&out);
    assert!(text(&out.stdout).contains("Not installed"));
    assert_eq!(env.calls().len(), 4);
}

#[test]
fn a_unit_someone_else_wrote_is_neither_replaced_nor_removed() {
    let env = Env::new();
    std::fs::create_dir_all(env.unit().parent().unwrap()).unwrap();
    let theirs = TEMPLATE.replace(TEMPLATE_EXEC_START, "ExecStart=/opt/baton run");
    std::fs::write(env.unit(), &theirs).unwrap();

    let out = env.run(&["service", "install"]);
    assert_eq!(out.status.code(), Some(8), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--force"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(env.unit()).unwrap(), theirs);
    assert!(env.calls().is_empty());

    let out = env.run(&["service", "uninstall"]);
    ok(&out);
    assert_eq!(std::fs::read_to_string(env.unit()).unwrap(), theirs);
    assert!(text(&out.stdout).contains("Left"), "{}", text(&out.stdout));

    ok(&env.run(&["service", "install", "--force"]));
    let unit = std::fs::read_to_string(env.unit()).unwrap();
    assert!(unit.starts_with(MARKER), "{unit}");
}

#[test]
fn with_the_package_unit_present_install_writes_nothing_and_enables_it() {
    let env = Env::new();
    std::fs::create_dir_all(env.system_dir()).unwrap();
    std::fs::write(
        env.system_dir().join("baton.service"),
        TEMPLATE.replace(TEMPLATE_EXEC_START, "ExecStart=/usr/bin/baton run"),
    )
    .unwrap();
    let out = env.run(&["service", "install"]);
    ok(&out);
    assert!(!env.unit().exists());
    assert!(!env.config().exists(), "wrote into the config dir");
    assert_eq!(
        env.calls(),
        [
            "--user daemon-reload | unit absent",
            "--user enable --now baton.service | unit absent",
        ]
    );
    assert!(
        text(&out.stdout).contains("Using the package's unit"),
        "{}",
        text(&out.stdout)
    );
    // Uninstall disables it and removes nothing (the package owns it).
    ok(&env.run(&["service", "uninstall"]));
    assert!(env.system_dir().join("baton.service").is_file());
    assert_eq!(
        env.calls()[2],
        "--user disable --now baton.service | unit absent"
    );
}

#[test]
fn with_the_package_unit_present_install_drops_its_own_older_unit() {
    let env = Env::new();
    ok(&env.run(&["service", "install"]));
    assert!(env.unit().is_file());
    std::fs::create_dir_all(env.system_dir()).unwrap();
    std::fs::write(env.system_dir().join("baton.service"), TEMPLATE).unwrap();
    ok(&env.run(&["service", "install"]));
    // Ours would shadow the package's.
    assert!(!env.unit().exists());
}

#[test]
fn no_user_manager_is_said_plainly_with_the_fix_and_exit_7() {
    let mut env = Env::new();
    env.fail = Some("Failed to connect to bus: No medium found".into());
    for args in [
        &["service", "install"][..],
        &["service", "uninstall"],
        &["service", "status"],
    ] {
        if args[1] == "uninstall" {
            // Something to uninstall, so systemctl is asked.
            std::fs::create_dir_all(env.unit().parent().unwrap()).unwrap();
            std::fs::write(env.unit(), format!("{MARKER}\n")).unwrap();
        }
        let out = env.run(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(7), "{args:?}: {err}");
        assert!(
            err.contains("no systemd user manager is reachable"),
            "{args:?}: {err}"
        );
        assert!(err.contains("loginctl enable-linger"), "{args:?}: {err}");
        assert!(err.contains("No medium found"), "{args:?}: {err}");
    }
    // The unit file stays for when the manager is there.
    assert!(env.unit().is_file());
    let help = text(&env.run(&["service", "--help"]).stdout);
    assert!(help.contains("7 no systemd user manager"), "{help}");
    assert!(help.contains("loginctl enable-linger"), "{help}");
}

#[test]
fn a_bus_without_systemd_leaves_no_unit_file_and_says_so_plainly() {
    for said in [
        "Failed to reload daemon: The name org.freedesktop.systemd1 was not provided by any .service files",
        "System has not been booted with systemd as init system (PID 1). Can't operate.",
    ] {
        let mut env = Env::new();
        env.fail = Some(said.into());
        let out = env.run(&["service", "install"]);
        let err = text(&out.stderr);
        // Before: exit 8, the raw systemctl error, and baton.service left behind.
        assert_eq!(out.status.code(), Some(7), "{err}");
        assert!(
            err.contains("no systemd user manager is reachable"),
            "{err}"
        );
        assert!(err.contains("loginctl enable-linger"), "{err}");
        assert!(!env.unit().exists(), "the unit file was left behind");
        assert!(
            text(&out.stdout).contains("Nothing installed"),
            "{}",
            text(&out.stdout)
        );
    }
}

#[test]
fn another_systemctl_failure_gives_its_message_and_exit_8() {
    let mut env = Env::new();
    env.fail = Some("Failed to enable unit: Access denied".into());
    let out = env.run(&["service", "install"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{err}");
    assert!(
        err.contains("`systemctl --user daemon-reload` failed") && err.contains("Access denied"),
        "{err}"
    );
}

#[test]
fn status_prints_one_line_and_exits_3_unless_running() {
    let mut env = Env::new();
    let unit = env.unit();
    env.show = format!(
        "LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\nFragmentPath={}",
        unit.display()
    );
    let out = env.run(&["service", "status"]);
    ok(&out);
    assert_eq!(
        text(&out.stdout),
        format!(
            "baton service: active (running), enabled, unit {}\n",
            unit.display()
        )
    );
    assert_eq!(
        env.calls(),
        [
            "--user show baton.service --property=LoadState,ActiveState,SubState,UnitFileState,FragmentPath | unit absent"
        ]
    );

    env.show = env
        .show
        .replace("=active", "=failed")
        .replace("=running", "=failed");
    let out = env.run(&["service", "status"]);
    assert_eq!(out.status.code(), Some(3));
    let line = text(&out.stdout);
    assert!(
        line.starts_with("baton service: failed (failed), enabled") && line.contains("journalctl"),
        "{line}"
    );

    env.show =
        "LoadState=not-found\nActiveState=inactive\nSubState=dead\nUnitFileState=\nFragmentPath="
            .into();
    let out = env.run(&["service", "status"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stdout).contains("not installed"),
        "{}",
        text(&out.stdout)
    );
}

/// The unit `install` writes is one systemd accepts, ExecStart and all.
#[test]
fn systemd_analyze_verifies_the_installed_unit() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("notice: systemd-analyze not found; skipping the unit verification");
        return;
    }
    let env = Env::new();
    ok(&env.run(&["service", "install"]));
    let runtime = env.dir.path().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--user", "--man=no"])
        .arg(env.unit())
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .unwrap();
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "systemd-analyze verify failed:\n{said}"
    );
    assert!(
        !said.contains("baton.service"),
        "systemd-analyze complained:\n{said}"
    );
}
