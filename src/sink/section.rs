//! What every sink's config section shares: how `baton config` spells values
//! (durations, TOML strings and lists), and how a section's values are read (durations,
//! event kinds, argvs), with errors that name the key.

use crate::clock::parse_duration_ms;
use crate::model::EventKind;
use std::time::Duration;

/// A bad value: the key it was found at (`webhook[0].url`) and what is wrong.
pub type Bad = (String, String);

pub fn ms_of(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The shortest exact spelling: `90s`, `10m`, `1h`, `250ms`.
pub fn fmt_duration(ms: u64) -> String {
    if ms == 0 {
        "0s".to_owned()
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// A string as a TOML value (quoted, escaped), for `baton config`.
pub fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// A list of strings as a TOML array, for `baton config`.
pub fn toml_list(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| toml_str(s)).collect();
    format!("[{}]", items.join(", "))
}

/// An argv to run (`on_event`, `desktop.on_click`): it must name a program.
pub fn check_argv(key: &str, argv: &[String]) -> Result<(), Bad> {
    if argv.first().is_none_or(|p| p.is_empty()) {
        return Err((
            key.to_owned(),
            "the command is empty (expected [\"program\", \"arg\", …])".to_owned(),
        ));
    }
    Ok(())
}

/// A duration at `key`, if set; `positive`: zero is refused.
pub fn duration(key: &str, v: &Option<String>, positive: bool) -> Result<Option<u64>, Bad> {
    let Some(s) = v else { return Ok(None) };
    let ms = parse_duration_ms(s).map_err(|e| (key.to_owned(), e))?;
    if positive && ms == 0 {
        return Err((key.to_owned(), format!("`{s}` must be longer than zero")));
    }
    Ok(Some(ms))
}

/// Event kinds as written in the stream (`turn_completed`, …).
pub fn parse_kinds(list: &[String]) -> Result<Vec<EventKind>, String> {
    list.iter()
        .map(|s| {
            crate::naming::parse_event_kind(s).ok_or_else(|| {
                let all: Vec<&str> = crate::naming::EVENT_KINDS
                    .iter()
                    .map(|k| k.as_str())
                    .collect();
                format!("unknown event `{s}` (one of {})", all.join(", "))
            })
        })
        .collect()
}

/// A list of event kinds as a TOML array, for `baton config`.
pub fn toml_kinds(k: &[EventKind]) -> String {
    let v: Vec<String> = k.iter().map(|k| k.as_str().to_owned()).collect();
    toml_list(&v)
}
