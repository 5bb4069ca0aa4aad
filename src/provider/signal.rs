//! What an agent says about a session besides its transcript: Claude Code's session
//! registry (`~/.claude/sessions/<pid>.json`), its background jobs
//! (`~/.claude/jobs/<id>/state.json`) and the agents' hooks. Each is read into a
//! [`Signal`] here in `provider/` (the only place that knows their field names); the
//! daemon's core hands it to the reducer, which applies it to the session with that id.
//! A signal never carries a message, turn key or line of its own: the transcript stays
//! the source of what was said, and a signal only tells *when* the agent waits or ends.

use crate::model::ProviderKind;

/// The agent's own word on a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    pub provider: ProviderKind,
    pub session: SessionRef,
    pub kind: SignalKind,
    pub source: SignalSource,
    /// The agent's own name for the session, where it gives one (a background job's
    /// `name`; untrusted, cleaned where it is kept).
    pub name: Option<String>,
}

/// Which session a signal is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionRef {
    /// The session id exactly.
    Id(String),
    /// A session whose id starts with this prefix followed by `-` (a background job's
    /// id is the first block of its session's uuid).
    Prefix(String),
}

impl SessionRef {
    pub fn matches(&self, session: &str) -> bool {
        match self {
            SessionRef::Id(id) => id == session,
            SessionRef::Prefix(p) => session
                .strip_prefix(p.as_str())
                .is_some_and(|rest| rest.starts_with('-')),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignalKind {
    /// The agent works.
    Busy,
    /// The agent waits for the person; `reason` names what for (`permission prompt`,
    /// `input needed`, `blocked`, `approval`), `message` is the agent's own short detail
    /// when it gives one (untrusted; clipped and cleaned like any transcript text).
    Waiting {
        reason: String,
        message: Option<String>,
    },
    /// The turn is over and the prompt is shown (registry `idle` or `shell`, a `Stop`
    /// hook, a job `done`).
    Idle,
}

/// Where a signal came from: names the completion's evidence when it decides one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalSource {
    Registry,
    Job,
    Hook,
}

impl SignalSource {
    pub fn as_str(self) -> &'static str {
        match self {
            SignalSource::Registry => "registry",
            SignalSource::Job => "job",
            SignalSource::Hook => "hook",
        }
    }

    /// The evidence of a completion this source decides.
    pub fn evidence(self) -> super::Evidence {
        match self {
            SignalSource::Registry => super::Evidence::RegistryIdle,
            SignalSource::Job => super::Evidence::JobDone,
            SignalSource::Hook => super::Evidence::HookStop,
        }
    }
}

/// Registry and job files are small; anything larger is not one.
pub const MAX_SIGNAL_FILE: u64 = 64 * 1024;
