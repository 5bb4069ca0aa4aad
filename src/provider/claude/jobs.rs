//! Claude Code background jobs (`claude --bg`; shared/docs/transcript-formats.md, Part
//! F.2): `<config dir>/jobs/<id>/state.json`, rewritten whole. `blocked` is a job
//! waiting on the person, `done` ends its turn; the job's conversation is an ordinary
//! transcript, read as any other. The job's id is the first block of its session id.

use crate::model::ProviderKind;
use crate::provider::signal::{MAX_SIGNAL_FILE, SessionRef, Signal, SignalKind, SignalSource};
use serde::Deserialize;

#[derive(Deserialize)]
struct Raw {
    state: Option<String>,
    detail: Option<String>,
    name: Option<String>,
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

/// One job's state, as far as baton uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub signal: Option<Signal>,
    pub name: Option<String>,
}

/// Whether `id` (a `jobs/` subdirectory's name) can be a job id: it is matched against
/// session ids, so only plain ids are taken.
pub fn is_job_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Parses the `state.json` of job `id`; `None` when it is not a job state (too large,
/// half-written, not JSON).
pub fn parse(id: &str, bytes: &[u8]) -> Option<Job> {
    if bytes.len() as u64 > MAX_SIGNAL_FILE {
        return None;
    }
    let raw: Raw = serde_json::from_slice(bytes).ok()?;
    let kind = match raw.state.as_deref() {
        Some("blocked") => Some(SignalKind::Waiting {
            reason: "blocked".to_owned(),
            message: raw.detail.filter(|d| !d.trim().is_empty()),
        }),
        Some("done") => Some(SignalKind::Idle),
        Some("running" | "working" | "busy") => Some(SignalKind::Busy),
        _ => None,
    };
    let session = match raw.session_id.filter(|s| !s.is_empty()) {
        Some(s) => SessionRef::Id(s),
        None => SessionRef::Prefix(id.to_owned()),
    };
    let name = raw.name.filter(|n| !n.trim().is_empty());
    Some(Job {
        signal: kind.map(|kind| Signal {
            provider: ProviderKind::Claude,
            session,
            kind,
            source: SignalSource::Job,
            name: name.clone(),
        }),
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_waits_and_done_ends() {
        let j = parse(
            "5ab1d332",
            br#"{"state":"blocked","detail":"needs approval for git push","tempo":"idle"}"#,
        )
        .unwrap();
        let s = j.signal.unwrap();
        assert_eq!(s.session, SessionRef::Prefix("5ab1d332".into()));
        assert!(s.session.matches("5ab1d332-1111-2222"));
        assert!(!s.session.matches("5ab1d3321-1111"));
        assert_eq!(
            s.kind,
            SignalKind::Waiting {
                reason: "blocked".into(),
                message: Some("needs approval for git push".into())
            }
        );
        let j = parse("5ab1d332", br#"{"state":"done","detail":"replied"}"#).unwrap();
        assert_eq!(j.signal.unwrap().kind, SignalKind::Idle);
        assert!(parse("5ab1d332", br#"{"state":"do"#).is_none());
        assert!(!is_job_id("../x"));
    }
}
