//! Claude Code's session registry (shared/docs/transcript-formats.md, Part F.1): one
//! small JSON file per live process, `<config dir>/sessions/<pid>.json`, rewritten whole
//! on each change. Every field is optional and untrusted; a file that does not parse
//! (half-written, replaced, not JSON) is an error the reader counts and retries.

use crate::model::ProviderKind;
use crate::provider::signal::{MAX_SIGNAL_FILE, SessionRef, Signal, SignalKind, SignalSource};
use serde::Deserialize;

/// One registry file, as far as baton uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub pid: u32,
    pub session: String,
    pub cwd: Option<String>,
    /// `kind: "background"` (a `claude --bg` job).
    pub background: bool,
    /// `session:@window.%pane` of the pane the process runs in.
    pub tmux: Option<String>,
    pub name: Option<String>,
    /// What the status says, if it is one baton knows.
    pub status: Option<SignalKind>,
    /// The process's start time as the registry spells it (`/proc/<pid>/stat` field 22).
    pub proc_start: Option<String>,
}

impl Entry {
    /// The signal this entry's status gives, if any.
    pub fn signal(&self) -> Option<Signal> {
        Some(Signal {
            provider: ProviderKind::Claude,
            session: SessionRef::Id(self.session.clone()),
            kind: self.status.clone()?,
            source: SignalSource::Registry,
            name: None,
        })
    }
}

#[derive(Deserialize)]
struct Raw {
    pid: Option<u32>,
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
    cwd: Option<String>,
    kind: Option<String>,
    tmux: Option<String>,
    name: Option<String>,
    status: Option<String>,
    #[serde(rename = "waitingFor")]
    waiting_for: Option<String>,
    #[serde(rename = "procStart")]
    proc_start: Option<serde_json::Value>,
}

/// Why a registry file was not used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadEntry {
    #[error("larger than {MAX_SIGNAL_FILE} bytes")]
    TooLarge,
    #[error("not a registry record: {0}")]
    Parse(String),
    #[error("no pid or session id")]
    Incomplete,
}

/// Whether `name` is a registry file's name (`<pid>.json`).
pub fn is_entry_name(name: &str) -> bool {
    name.strip_suffix(".json")
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// Parses a registry file's bytes.
pub fn parse(bytes: &[u8]) -> Result<Entry, BadEntry> {
    if bytes.len() as u64 > MAX_SIGNAL_FILE {
        return Err(BadEntry::TooLarge);
    }
    let raw: Raw = serde_json::from_slice(bytes).map_err(|e| BadEntry::Parse(e.to_string()))?;
    let (Some(pid), Some(session)) = (raw.pid, raw.session_id.filter(|s| !s.is_empty())) else {
        return Err(BadEntry::Incomplete);
    };
    let status = match raw.status.as_deref() {
        Some("busy") => Some(SignalKind::Busy),
        // `shell`: the turn is over, background shells still run.
        Some("idle" | "shell") => Some(SignalKind::Idle),
        Some("waiting") => Some(SignalKind::Waiting {
            reason: raw
                .waiting_for
                .filter(|w| !w.trim().is_empty())
                .unwrap_or_else(|| "input needed".to_owned()),
            message: None,
        }),
        _ => None,
    };
    let proc_start = raw.proc_start.and_then(|v| match v {
        serde_json::Value::String(s) => Some(s.trim().to_owned()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    });
    Ok(Entry {
        pid,
        session,
        cwd: raw.cwd,
        background: raw.kind.as_deref() == Some("background"),
        tmux: raw.tmux.filter(|t| !t.is_empty()),
        name: raw.name,
        status,
        proc_start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_documented_shape() {
        let e = parse(br#"{"pid":4002330,"sessionId":"cd4b5468-aaaa","cwd":"/home/me/src/platform","kind":"interactive","tmux":"t1:@0.%0","name":"probe-1","status":"waiting","waitingFor":"permission prompt","statusUpdatedAt":1791003614830,"procStart":"123456"}"#).unwrap();
        assert_eq!(e.pid, 4002330);
        assert_eq!(e.session, "cd4b5468-aaaa");
        assert_eq!(e.tmux.as_deref(), Some("t1:@0.%0"));
        assert_eq!(e.proc_start.as_deref(), Some("123456"));
        assert_eq!(
            e.status,
            Some(SignalKind::Waiting {
                reason: "permission prompt".into(),
                message: None
            })
        );
    }

    #[test]
    fn shell_is_idle_and_spacing_does_not_matter() {
        let e = parse(b"{ \"pid\" : 7 , \"sessionId\" : \"s\" , \"status\" : \"shell\" , \"procStart\" : 99 }").unwrap();
        assert_eq!(e.status, Some(SignalKind::Idle));
        assert_eq!(e.proc_start.as_deref(), Some("99"));
    }

    #[test]
    fn half_written_and_odd_files_are_errors_not_panics() {
        assert!(matches!(
            parse(br#"{"pid":7,"sessionId":"s","sta"#),
            Err(BadEntry::Parse(_))
        ));
        assert_eq!(parse(br#"{"status":"busy"}"#), Err(BadEntry::Incomplete));
        assert!(parse(&[0u8; 16]).is_err());
        assert!(parse(&[0xff, 0xfe, b'{']).is_err());
        let big = vec![b' '; MAX_SIGNAL_FILE as usize + 1];
        assert_eq!(parse(&big), Err(BadEntry::TooLarge));
        // An unknown status is no signal, not an error.
        let e = parse(br#"{"pid":7,"sessionId":"s","status":"dreaming"}"#).unwrap();
        assert_eq!(e.signal(), None);
    }

    #[test]
    fn entry_names() {
        assert!(is_entry_name("4002330.json"));
        assert!(!is_entry_name(".json"));
        assert!(!is_entry_name("x.json"));
        assert!(!is_entry_name("12.json.tmp"));
    }
}
