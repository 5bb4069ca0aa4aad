//! The desktop sink's section of the config file, `[desktop]`: whether it is on, which
//! events notify, the cooldown, and the keys about acting on a notification
//! (`suppress_when_focused`, `on_click`, `mute`, `quiet_hours` and the per-kind
//! `[desktop.kinds.KIND]` tables). Its [`SinkKind`] impl makes the desktop a registered
//! sink (see [`super::registry`]).

use super::SinkError;
use super::delivery::Delivered;
use super::desktop::{Board, Desktop, DesktopConfig, DesktopSink};
use super::registry::{SinkKind, Sinks};
use super::section::{
    Bad, check_argv, duration, fmt_duration, ms_of, parse_kinds, toml_kinds, toml_list, toml_str,
};
use crate::naming::parse_event_kind;
use crate::sink::kinds::{STYLED, Style, Urgency};
use crate::sink::quiet::QuietHours;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// `[desktop]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDesktop {
    pub enabled: Option<bool>,
    pub events: Option<Vec<String>>,
    pub cooldown: Option<String>,
    pub suppress_when_focused: Option<bool>,
    pub on_click: Option<Vec<String>>,
    pub mute: Option<Vec<String>>,
    pub quiet_hours: Option<String>,
    pub kinds: Option<BTreeMap<String, RawKind>>,
}

/// `[desktop.kinds.KIND]`: one kind's look and sound.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKind {
    pub urgency: Option<String>,
    pub sound_name: Option<String>,
    pub sound_file: Option<String>,
    pub timeout_ms: Option<u32>,
    pub priority: Option<u8>,
}

/// Desktop notification settings (`[desktop]`, validated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesktopSection {
    /// Off with `enabled = false` (or `--no-desktop`).
    pub enabled: bool,
    pub sink: DesktopConfig,
}

impl Default for DesktopSection {
    fn default() -> Self {
        DesktopSection {
            enabled: true,
            sink: DesktopConfig::default(),
        }
    }
}

impl SinkKind for Desktop {
    type Raw = RawDesktop;
    type Config = DesktopSection;

    fn parse(d: RawDesktop, c: &mut DesktopSection, _: &Sinks) -> Result<(), Bad> {
        if let Some(b) = d.enabled {
            c.enabled = b;
        }
        if let Some(ev) = &d.events {
            c.sink.kinds = parse_kinds(ev).map_err(|e| ("desktop.events".to_owned(), e))?;
        }
        if let Some(ms) = duration("desktop.cooldown", &d.cooldown, false)? {
            c.sink.cooldown = Duration::from_millis(ms);
        }
        apply(&d, &mut c.sink)
    }

    fn write(d: &DesktopSection, o: &mut String) {
        let _ = writeln!(
            o,
            "# Desktop notifications over D-Bus (main conversations only; --no-desktop turns them off).\n\
             [desktop]\n\
             enabled = {}\n\
             # Which events notify (only turn_completed, turn_failed and needs_input can).\n\
             events = {}\n\
             # Shortest time between two notifications of one session.\n\
             cooldown = {}",
            d.enabled,
            toml_kinds(&d.sink.kinds),
            toml_str(&fmt_duration(ms_of(d.sink.cooldown)))
        );
        write(o, &d.sink);
    }

    fn build(d: &DesktopSection, board: &Board) -> Result<Vec<Delivered<Desktop>>, SinkError> {
        if !d.enabled {
            return Ok(Vec::new());
        }
        Ok(vec![DesktopSink::with_board(
            d.sink.clone(),
            board.clone(),
        )?])
    }
}

/// Validates `d`'s keys into `cfg`.
fn apply(d: &RawDesktop, cfg: &mut DesktopConfig) -> Result<(), Bad> {
    if let Some(b) = d.suppress_when_focused {
        cfg.suppress_when_focused = b;
    }
    if let Some(argv) = &d.on_click {
        check_argv("desktop.on_click", argv)?;
        cfg.on_click = argv.clone();
    }
    if let Some(m) = &d.mute {
        if let Some(bad) = m.iter().find(|t| t.trim().is_empty()) {
            return Err((
                "desktop.mute".to_owned(),
                format!("`{bad}` names no project or session"),
            ));
        }
        cfg.rules.mute = m.iter().map(|t| t.trim().to_owned()).collect();
    }
    if let Some(q) = &d.quiet_hours {
        cfg.rules.quiet_hours =
            Some(QuietHours::parse(q).map_err(|e| ("desktop.quiet_hours".to_owned(), e))?);
    }
    for (name, k) in d.kinds.iter().flatten() {
        let key = |f: &str| format!("desktop.kinds.{name}.{f}");
        let style = parse_event_kind(name)
            .and_then(|kind| cfg.styles.get_mut(kind))
            .ok_or_else(|| {
                let all: Vec<&str> = STYLED.iter().map(|k| k.as_str()).collect();
                (
                    format!("desktop.kinds.{name}"),
                    format!("unknown kind `{name}` (one of {})", all.join(", ")),
                )
            })?;
        style_from(k, style, &key)?;
    }
    Ok(())
}

fn style_from(k: &RawKind, style: &mut Style, key: &dyn Fn(&str) -> String) -> Result<(), Bad> {
    if let Some(u) = &k.urgency {
        style.urgency = Urgency::parse(u).ok_or_else(|| {
            (
                key("urgency"),
                format!("unknown urgency `{u}` (low, normal or critical)"),
            )
        })?;
    }
    if let Some(n) = &k.sound_name {
        let ok = !n.is_empty()
            && n.len() <= 128
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !ok {
            return Err((
                key("sound_name"),
                format!("`{n}` is not a sound theme name (e.g. message-new-instant)"),
            ));
        }
        style.sound_name = Some(n.clone());
    }
    if let Some(f) = &k.sound_file {
        let p = PathBuf::from(f);
        if !p.is_absolute() {
            return Err((key("sound_file"), format!("`{f}` is not an absolute path")));
        }
        style.sound_file = Some(p);
    }
    if let Some(t) = k.timeout_ms {
        style.timeout_ms = Some(t);
    }
    if let Some(p) = k.priority {
        if !(1..=5).contains(&p) {
            return Err((
                key("priority"),
                format!("{p} is not an ntfy priority (1 to 5)"),
            ));
        }
        style.priority = Some(p);
    }
    Ok(())
}

/// The keys as `baton config` prints them, each with its comment.
fn write(o: &mut String, cfg: &DesktopConfig) {
    let (q, list) = (toml_str, toml_list);
    let _ = writeln!(
        o,
        "# No notification while the session is in front of you (its tmux pane active in an\n\
         # attached client whose terminal is the active X11 window).\n\
         suppress_when_focused = {}",
        cfg.suppress_when_focused
    );
    if cfg.on_click.is_empty() {
        o.push_str(
            "# Run on a click (argv, no shell), with BATON_PID, BATON_TMUX_PANE, BATON_CWD,\n\
             # BATON_PROJECT, BATON_SESSION, BATON_PROVIDER and BATON_PATH set (off).\n\
             # on_click = [\"program\", \"arg\"]\n",
        );
    } else {
        let _ = writeln!(
            o,
            "# Run on a click (argv, no shell), with BATON_PID, BATON_TMUX_PANE, BATON_CWD,\n\
             # BATON_PROJECT, BATON_SESSION, BATON_PROVIDER and BATON_PATH set.\n\
             on_click = {}",
            list(&cfg.on_click)
        );
    }
    let _ = writeln!(
        o,
        "# Projects or sessions never shown (`baton mute` adds some for a while).\n\
         mute = {}",
        list(&cfg.rules.mute)
    );
    match cfg.rules.quiet_hours {
        Some(qh) => {
            let _ = writeln!(o, "# No notifications in this span of local time.\nquiet_hours = {}", q(&qh.to_text()));
        }
        None => o.push_str("# No notifications in this span of local time (off).\n# quiet_hours = \"22:00-07:30\"\n"),
    }
    o.push('\n');
    for kind in STYLED {
        let Some(s) = cfg.styles.get(kind) else {
            continue;
        };
        let _ = writeln!(
            o,
            "# How {} looks and sounds; priority is ntfy's (1-5) for webhooks.",
            kind.as_str()
        );
        let _ = writeln!(o, "[desktop.kinds.{}]", kind.as_str());
        let _ = writeln!(
            o,
            "# low, normal or critical (critical stays until dismissed).\nurgency = {}",
            q(s.urgency.as_str())
        );
        match &s.sound_name {
            Some(n) => {
                let _ = writeln!(o, "# A freedesktop sound theme name.\nsound_name = {}", q(n));
            }
            None => o.push_str("# A freedesktop sound theme name (none).\n# sound_name = \"message-new-instant\"\n"),
        }
        match &s.sound_file {
            Some(f) => {
                let _ = writeln!(
                    o,
                    "# A sound file played instead.\nsound_file = {}",
                    q(&f.display().to_string())
                );
            }
            None => o.push_str(
                "# A sound file played instead (none).\n# sound_file = \"/path/to/sound.oga\"\n",
            ),
        }
        match s.timeout_ms {
            Some(t) => {
                let _ = writeln!(o, "# How long it shows, in ms (0: until dismissed).\ntimeout_ms = {t}");
            }
            None => o.push_str("# How long it shows, in ms (0: until dismissed; unset: the server decides).\n# timeout_ms = 10000\n"),
        }
        match s.priority {
            Some(p) => {
                let _ = writeln!(o, "# ntfy priority for webhooks (1-5).\npriority = {p}");
            }
            None => o.push_str("# ntfy priority for webhooks (1-5; unset: the server's default).\n# priority = 3\n"),
        }
        o.push('\n');
    }
}
