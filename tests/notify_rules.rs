//! Mute and quiet hours on a fake clock, through the real desktop sink (its pages go to
//! a capture queue): what is held back, and what `status` is told. And the config keys
//! that set them, with their errors and `baton config`'s comments.

#![allow(clippy::unwrap_used)]

use crate::common;

use baton::config::Config;
use baton::model::{EventKind, ProviderKind};
use baton::sink::desktop::{Board, DesktopConfig, DesktopSink, Job};
use baton::sink::quiet::{QuietHours, Rules};
use baton::state::mutes::Mutes;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// 2026-01-01T00:00:00Z.
const MIDNIGHT: i64 = 1_767_225_600_000;
const HOUR: i64 = 3_600_000;

fn done(session: &str, project: &str) -> baton::model::Event {
    let mut ev = common::sample_event(EventKind::TurnCompleted, 1, "done");
    ev.provider = Some(ProviderKind::Claude);
    ev.session = Some(session.to_owned());
    ev.project = Some(project.to_owned());
    ev.id = format!("{session}-{}", ev.id);
    ev
}

fn shown(rx: &crossbeam_channel::Receiver<Job>) -> Vec<String> {
    rx.try_iter()
        .filter_map(|j| match j {
            Job::Show(n) => Some(n.click.session),
            Job::Close { .. } => None,
        })
        .collect()
}

#[test]
fn mutes_and_quiet_hours_on_a_fake_clock() {
    let clock = Arc::new(AtomicI64::new(MIDNIGHT + 12 * HOUR));
    let c = Arc::clone(&clock);
    let board = Board::default();
    let cfg = DesktopConfig {
        cooldown: Duration::ZERO,
        rules: Rules {
            mute: vec!["noisy".to_owned()],
            quiet_hours: Some(QuietHours::parse("22:00-07:30").unwrap()),
        },
        ..DesktopConfig::default()
    };
    let (mut sink, rx) = DesktopSink::capture_at(
        cfg,
        board.clone(),
        Arc::new(move || c.load(Ordering::SeqCst)),
        jiff::tz::TimeZone::UTC,
    );
    let t = Instant::now();
    // Noon: shown, except the project muted in config.
    sink.deliver_at(&done("s1", "web"), t);
    sink.deliver_at(&done("s2", "noisy"), t);
    assert_eq!(shown(&rx), ["s1"]);
    // `baton mute web --for 1h`, through the shared board.
    board
        .mutes
        .set("web", Some(MIDNIGHT + 13 * HOUR), MIDNIGHT + 12 * HOUR)
        .unwrap();
    sink.deliver_at(&done("s1", "web"), t);
    sink.deliver_at(&done("s3", "api"), t);
    assert_eq!(shown(&rx), ["s3"]);
    let reason_now = |s: &str| {
        board
            .held
            .recent()
            .iter()
            .find(|h| h.session == s)
            .map(|h| h.reason.as_str())
    };
    assert_eq!(reason_now("s1"), Some("muted_for"));
    // An hour later the mute is over.
    clock.store(MIDNIGHT + 13 * HOUR, Ordering::SeqCst);
    sink.deliver_at(&done("s1", "web"), t);
    assert_eq!(shown(&rx), ["s1"]);
    // Shown again: no longer listed as "Not shown" (before: the entry stayed).
    assert_eq!(reason_now("s1"), None);
    // A mute by session id.
    board.mutes.set("s3", None, MIDNIGHT + 13 * HOUR).unwrap();
    sink.deliver_at(&done("s3", "api"), t);
    assert!(shown(&rx).is_empty());
    board.mutes.unset("s3", MIDNIGHT + 13 * HOUR).unwrap();
    // 23:10 and 07:29 are quiet; 07:30 is not.
    for (at, expect) in [
        (23 * HOUR + 600_000, false),
        (7 * HOUR + 29 * 60_000, false),
        (7 * HOUR + 30 * 60_000, true),
    ] {
        clock.store(MIDNIGHT + 24 * HOUR + at, Ordering::SeqCst);
        sink.deliver_at(&done("s3", "api"), t);
        assert_eq!(shown(&rx).len(), usize::from(expect), "at {at}");
        let listed = if expect { None } else { Some("quiet_hours") };
        assert_eq!(reason_now("s3"), listed, "at {at}");
    }
    let held = board.held.recent();
    let reason = |s: &str| {
        held.iter()
            .find(|h| h.session == s)
            .map(|h| h.reason.as_str())
    };
    assert_eq!(reason("s2"), Some("muted"));
    assert_eq!(reason("s3"), None);
    let (stats, _) = sink.close(Duration::from_secs(1));
    assert_eq!(stats.muted, 5, "{stats:?}");
}

#[test]
fn mutes_are_saved_in_the_state_dir() {
    let dir = tempfile::tempdir().unwrap();
    Mutes::load(dir.path()).set("web", None, 0).unwrap();
    assert!(dir.path().join("mutes.json").exists());
    assert_eq!(Mutes::load(dir.path()).live(1)[0].target, "web");
}

fn parse(text: &str) -> Result<Config, String> {
    Config::parse(text, Path::new("/x/config.toml")).map_err(|e| e.to_string())
}

#[test]
fn config_keys_are_validated_and_printed() {
    let c = parse(
        r#"
[desktop]
suppress_when_focused = false
on_click = ["code", "--goto"]
mute = ["noisy"]
quiet_hours = "22:00-07:30"
[desktop.kinds.needs_input]
urgency = "normal"
sound_name = "bell"
timeout_ms = 5000
priority = 5
[desktop.kinds.turn_completed]
sound_file = "/usr/share/sounds/done.oga"
[on_event]
command = ["/bin/hook"]
suppress_when_focused = true
[[webhook]]
url = "https://ntfy.example/quiet"
suppress_when_focused = true
[[webhook]]
url = "https://ntfy.example/loud"
"#,
    )
    .unwrap();
    let d = &c.desktop.sink;
    assert!(!d.suppress_when_focused);
    // The hook's and webhooks' own: as set, else off.
    assert!(c.on_event.as_ref().unwrap().suppress_when_focused);
    let hooks: Vec<bool> = c.webhooks.iter().map(|w| w.suppress_when_focused).collect();
    assert_eq!(hooks, [true, false]);
    assert_eq!(d.on_click, ["code", "--goto"]);
    let q = d.styles.get(EventKind::NeedsInput).unwrap();
    assert_eq!(
        (
            q.urgency.as_str(),
            q.sound_name.as_deref(),
            q.timeout_ms,
            q.priority
        ),
        ("normal", Some("bell"), Some(5000), Some(5))
    );
    let toml = c.to_toml();
    for line in [
        "suppress_when_focused = false",
        "on_click = [\"code\", \"--goto\"]",
        "mute = [\"noisy\"]",
        "quiet_hours = \"22:00-07:30\"",
        "[desktop.kinds.needs_input]",
        "sound_name = \"bell\"",
        "priority = 5",
        "sound_file = \"/usr/share/sounds/done.oga\"",
        "[desktop.kinds.turn_failed]",
        "events = [\"turn_completed\", \"turn_failed\", \"needs_input\"]\n\
         # No run while the session is in front of you (as desktop's).\n\
         suppress_when_focused = true\n",
        "url = \"https://ntfy.example/loud\"",
    ] {
        assert!(toml.contains(line), "missing {line:?} in:\n{toml}");
    }
    let webhook_lines: Vec<&str> = toml
        .lines()
        .filter(|l| l.starts_with("suppress_when_focused"))
        .collect();
    assert_eq!(
        webhook_lines,
        [
            "suppress_when_focused = false",
            "suppress_when_focused = true",
            "suppress_when_focused = true",
            "suppress_when_focused = false"
        ],
        "desktop, on_event, then each webhook:\n{toml}"
    );
    // What `baton config` prints parses back to the same settings.
    let again = parse(&toml).unwrap();
    assert_eq!(again.desktop, c.desktop);
    assert_eq!(again.on_event, c.on_event);
    assert_eq!(again.webhooks, c.webhooks);
    // Defaults are printed too, commented where unset.
    let def = Config::default().to_toml();
    assert!(def.contains("# quiet_hours = \"22:00-07:30\""), "{def}");
    assert!(def.contains("suppress_when_focused = true"), "{def}");
    let hooks =
        parse("on_event = [\"/bin/hook\"]\n[[webhook]]\nurl = \"http://127.0.0.1:1/\"\n").unwrap();
    assert!(!hooks.on_event.unwrap().suppress_when_focused);
    assert!(!hooks.webhooks[0].suppress_when_focused);
    assert_eq!(parse(&def).unwrap().desktop, Config::default().desktop);

    for (text, says) in [
        (
            "[desktop]\nquiet_hours = \"22:00\"",
            "`desktop.quiet_hours`: `22:00` is not HH:MM-HH:MM",
        ),
        (
            "[desktop]\non_click = []",
            "`desktop.on_click`: the command is empty",
        ),
        ("[desktop]\nmute = [\"\"]", "`desktop.mute`"),
        (
            "[desktop.kinds.anomaly]\nurgency = \"low\"",
            "unknown kind `anomaly`",
        ),
        (
            "[desktop.kinds.needs_input]\nurgency = \"loud\"",
            "`desktop.kinds.needs_input.urgency`: unknown urgency `loud`",
        ),
        (
            "[desktop.kinds.needs_input]\npriority = 9",
            "not an ntfy priority",
        ),
        (
            "[desktop.kinds.needs_input]\nsound_file = \"rel.oga\"",
            "not an absolute path",
        ),
        (
            "[desktop.kinds.needs_input]\nsound_name = \"a b\"",
            "not a sound theme name",
        ),
        (
            "[desktop.kinds.needs_input]\nvolume = 3",
            "unknown field `volume`",
        ),
        (
            "[on_event]\ncommand = [\"/bin/hook\"]\nsuppress_when_focused = \"yes\"",
            "invalid type: string \"yes\", expected a boolean",
        ),
        (
            "[[webhook]]\nurl = \"http://127.0.0.1:1/\"\nsuppress_when_focused = 1",
            "invalid type: integer `1`, expected a boolean",
        ),
    ] {
        let e = parse(text).unwrap_err();
        assert!(e.contains(says), "{text:?}: {e}");
    }
}
