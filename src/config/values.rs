//! How `baton config` spells values (durations, TOML strings and lists), and the one
//! check every configured argv gets.

use std::time::Duration;

pub(super) fn ms_of(d: Duration) -> u64 {
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
pub(super) fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// A list of strings as a TOML array, for `baton config`.
pub(super) fn toml_list(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| toml_str(s)).collect();
    format!("[{}]", items.join(", "))
}

/// An argv to run (`on_event`, `desktop.on_click`): it must name a program.
pub(super) fn check_argv(key: &str, argv: &[String]) -> Result<(), (String, String)> {
    if argv.first().is_none_or(|p| p.is_empty()) {
        return Err((
            key.to_owned(),
            "the command is empty (expected [\"program\", \"arg\", …])".to_owned(),
        ));
    }
    Ok(())
}
