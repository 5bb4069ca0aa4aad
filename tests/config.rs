//! The config file: errors that name the key and the file, flags over the file, and
//! `baton config` output that reads back as the same configuration.

#![allow(clippy::unwrap_used)]

use crate::common;

use crate::common::{Claude, Daemon, append};
use std::process::{Command, Output};

fn baton(dir: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_baton"));
    c.env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_RUNTIME_DIR", dir.join("run"))
        .env("HOME", dir);
    c
}

fn write_config(dir: &std::path::Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("config").join("baton").join("config.toml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn unknown_keys_are_errors_naming_the_key_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("setle = \"5s\"\n", "setle"),
        ("[desktop]\nenable = false\n", "enable"),
        (
            "[[webhook]]\nurl = \"http://127.0.0.1:1/\"\nformats = \"ntfy\"\n",
            "formats",
        ),
        (
            "[on_event]\ncommand = [\"/bin/true\"]\nconcurency = 3\n",
            "concurency",
        ),
    ];
    for (text, key) in cases {
        let path = write_config(dir.path(), text);
        // The default file, read by both `config` and `run`.
        for args in [&["config"][..], &["run", "--no-default-roots"][..]] {
            let out = baton(dir.path()).args(args).output().unwrap();
            assert_eq!(
                out.status.code(),
                Some(2),
                "{args:?} {text}: {}",
                stderr(&out)
            );
            let err = stderr(&out);
            assert!(err.contains(&format!("`{key}`")), "{key} not named: {err}");
            assert!(
                err.contains(&path.display().to_string()),
                "file not named: {err}"
            );
        }
    }
}

#[test]
fn bad_values_name_the_key_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("settle = \"5 fortnights\"\n", "settle"),
        ("watcher = \"magic\"\n", "watcher"),
        // Not an agent baton reads (`gemini` was, before issue 31 made it one).
        ("watch = [\"aider=/tmp\"]\n", "watch"),
        ("[desktop]\nevents = [\"turn_done\"]\n", "desktop.events"),
        ("on_event = []\n", "on_event"),
        (
            "[[webhook]]\nurl = \"ftp://example.com\"\n",
            "webhook[0].url",
        ),
        ("max_line_bytes = \"big\"\n", "max_line_bytes"),
    ];
    for (text, key) in cases {
        let path = dir.path().join("my.toml");
        std::fs::write(&path, text).unwrap();
        let out = baton(dir.path())
            .args(["config", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{text}");
        let err = stderr(&out);
        assert!(err.contains(key), "{key} not named: {err}");
        assert!(err.contains("my.toml"), "file not named: {err}");
    }
}

const FULL: &str = r#"
default_roots = false
watch = ["claude=/srv/a b/projects", "auto=/srv/other"]
events = "/var/tmp/events.jsonl"
watcher = "poll"
poll_interval = "500ms"
settle = "45s"
catch_up = "1h"
max_line_bytes = 1048576

[desktop]
enabled = false
events = ["turn_failed"]
cooldown = "1m"

[on_event]
command = ["/usr/bin/notify-me", "--quote=\"x\""]
timeout = "3s"
concurrency = 1
events = ["turn_completed", "needs_input"]

[[webhook]]
url = "https://ntfy.sh/topic"
format = "ntfy"

[[webhook]]
url = "http://127.0.0.1:9/hook"
headers = { Authorization = "Bearer t", "X-Other" = "a\"b" }
events = ["turn_failed", "anomaly"]

[[remote]]
name = "devbox"
ssh = "me@devbox"
ssh_options = ["-p", "2222"]
remote_baton = "/opt/baton/bin/baton"

[[remote]]
name = "ci-box"
command = ["/usr/local/bin/events-of", "ci box"]
"#;

#[test]
fn config_output_parses_back_to_the_same_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("full.toml");
    std::fs::write(&path, FULL).unwrap();
    let out = baton(dir.path())
        .args(["config", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    let table: toml::Table = toml::from_str(&printed).unwrap();
    assert_eq!(table["settle"].as_str(), Some("45s"));
    assert_eq!(table["poll_interval"].as_str(), Some("500ms"));
    assert_eq!(table["watcher"].as_str(), Some("poll"));
    assert_eq!(table["desktop"]["cooldown"].as_str(), Some("1m"));
    assert_eq!(table["webhook"].as_array().unwrap().len(), 2);
    assert_eq!(
        table["webhook"][1]["headers"]["X-Other"].as_str(),
        Some("a\"b")
    );
    assert!(printed.contains("\n# "), "no comments:\n{printed}");
    // Before: no `[[remote]]` at all.
    let remotes = table["remote"].as_array().unwrap();
    assert_eq!(remotes.len(), 2, "{printed}");
    assert_eq!(remotes[0]["name"].as_str(), Some("devbox"));
    assert_eq!(remotes[0]["ssh"].as_str(), Some("me@devbox"));
    assert_eq!(remotes[0]["ssh_options"][1].as_str(), Some("2222"));
    assert_eq!(
        remotes[0]["remote_baton"].as_str(),
        Some("/opt/baton/bin/baton")
    );
    assert_eq!(remotes[1]["command"][1].as_str(), Some("ci box"));

    // Fed back, it prints the same (apart from the header naming the file).
    let again = dir.path().join("again.toml");
    std::fs::write(&again, &printed).unwrap();
    let out2 = baton(dir.path())
        .args(["config", "--config"])
        .arg(&again)
        .output()
        .unwrap();
    assert!(out2.status.success(), "{}", stderr(&out2));
    let body = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(
        body(&printed),
        body(&String::from_utf8(out2.stdout).unwrap())
    );

    // With no file at all: the defaults, also valid TOML.
    let out = baton(dir.path()).arg("config").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let t: toml::Table = toml::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(t["settle"].as_str(), Some("90s"));
    assert_eq!(t["desktop"]["enabled"].as_bool(), Some(true));
}

#[test]
fn flags_override_the_config_file() {
    let d = Daemon::tree();
    let from_config = d.dir.path().join("from-config.jsonl");
    let cfg = d.config_home().join("baton").join("config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    // The harness passes --events (to d.events) and --no-default-roots with --watch.
    std::fs::write(
        &cfg,
        format!(
            "events = \"{}\"\ndefault_roots = true\nsettle = \"1h\"\n",
            from_config.display()
        ),
    )
    .unwrap();
    // --settle 200ms beats settle = "1h": an unmarked answer completes by quiet.
    let mut d = d.start(&["--settle", "200ms"]);
    let c = Claude::new();
    let (p, turn) = c.prompt("hi");
    let answer = serde_json::json!({
        "type": "assistant", "uuid": common::uuid(), "sessionId": c.session,
        "timestamp": common::ts_now(),
        "message": {"role": "assistant", "model": "m",
                    "content": [{"type": "text", "text": "no end marker"}], "stop_reason": null}
    });
    append(&c.path_in(&d.claude()), format!("{p}{answer}\n").as_bytes());
    let ev = d.wait_for("turn_completed", common::is("turn_completed", turn));
    assert_eq!(ev["evidence"], "quiet");
    d.stop();
    assert!(!from_config.exists(), "--events did not override the file");
}

/// The `[desktop]` keys `FULL` leaves out, in a table of their own.
const DESKTOP: &str = r#"
[desktop.kinds.needs_input]
sound_file = "/x.oga"
"#;

/// Every key `baton config` prints (from a file that sets them all) has a row in the
/// configuration reference's Settings table: `key`, `table.key`, `desktop.kinds.KIND`
/// `key` or `[[table]]` `key`.
#[test]
fn the_configuration_reference_lists_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("all.toml");
    let full = FULL.replace(
        "[desktop]\n",
        "[desktop]\nmute = [\"x\"]\nquiet_hours = \"22:00-07:30\"\non_click = [\"a\"]\n",
    );
    std::fs::write(
        &path,
        format!("metrics = \"127.0.0.1:9464\"\nmetrics_allow_remote = true\n{full}\n{DESKTOP}"),
    )
    .unwrap();
    let out = baton(dir.path())
        .args(["config", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let printed: toml::Table = toml::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let doc = include_str!("../docs/configuration.md");
    let settings = doc
        .split("## Settings")
        .nth(1)
        .and_then(|s| s.split("The other commands' flags").next())
        .unwrap();
    let mut names = Vec::new();
    for (k, v) in &printed {
        match v {
            toml::Value::Table(t) => {
                for (k2, v2) in t {
                    match v2 {
                        toml::Value::Table(kinds) if k2 == "kinds" => {
                            for kind in kinds.values() {
                                for k3 in kind.as_table().unwrap().keys() {
                                    names.push(format!("`{k}.kinds.KIND` `{k3}`"));
                                }
                            }
                        }
                        _ => names.push(format!("`{k}.{k2}`")),
                    }
                }
            }
            toml::Value::Array(a) if a.first().is_some_and(toml::Value::is_table) => {
                for t in a {
                    for k2 in t.as_table().unwrap().keys() {
                        names.push(format!("`[[{k}]]` `{k2}`"));
                    }
                }
            }
            _ => names.push(format!("`{k}`")),
        }
    }
    names.sort();
    names.dedup();
    assert!(names.len() >= 42, "{names:?}");
    // Before: metrics, [[remote]], desktop.mute, quiet_hours, suppress_when_focused,
    // on_click and kinds had no row.
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| {
            // `on_event.command` is the table form of the `on_event` row.
            n.as_str() != "`on_event.command`"
                && !settings.lines().any(|l| l.starts_with(&format!("| {n} |")))
        })
        .collect();
    assert!(missing.is_empty(), "no row for {missing:?}");
}
