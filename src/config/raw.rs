//! The config file as written: every key optional, unknown keys rejected. Validated
//! into [`Config`](super::Config) by `mod.rs`.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub default_roots: Option<bool>,
    pub watch: Option<Vec<String>>,
    pub events: Option<String>,
    pub watcher: Option<String>,
    pub poll_interval: Option<String>,
    pub settle: Option<String>,
    pub catch_up: Option<String>,
    pub hold_background: Option<String>,
    pub needs_input_grace: Option<String>,
    pub page_scheduled: Option<bool>,
    pub liveness_after: Option<String>,
    pub max_line_bytes: Option<usize>,
    pub max_followers: Option<usize>,
    pub metrics: Option<String>,
    pub metrics_allow_remote: Option<bool>,
    pub desktop: Option<RawDesktop>,
    pub on_event: Option<RawExec>,
    pub webhook: Option<Vec<RawWebhook>>,
    pub remote: Option<Vec<RawRemote>>,
}

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

/// `on_event = ["program", "arg"]`, or a table with `command` and limits.
#[derive(Debug, Default)]
pub struct RawExec {
    pub command: Vec<String>,
    pub timeout: Option<String>,
    pub concurrency: Option<usize>,
    pub events: Option<Vec<String>>,
    pub suppress_when_focused: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExecTable {
    command: Vec<String>,
    timeout: Option<String>,
    concurrency: Option<usize>,
    events: Option<Vec<String>>,
    suppress_when_focused: Option<bool>,
}

impl<'de> Deserialize<'de> for RawExec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Hand-written rather than `untagged`, whose error would not name a bad key.
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawExec;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an argv array [\"program\", \"arg\", …] or a table with `command`")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<RawExec, A::Error> {
                let command =
                    Vec::<String>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))?;
                Ok(RawExec {
                    command,
                    ..RawExec::default()
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawExec, A::Error> {
                let t =
                    RawExecTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(RawExec {
                    command: t.command,
                    timeout: t.timeout,
                    concurrency: t.concurrency,
                    events: t.events,
                    suppress_when_focused: t.suppress_when_focused,
                })
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWebhook {
    pub url: String,
    pub format: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub events: Option<Vec<String>>,
    pub suppress_when_focused: Option<bool>,
}

/// `[[remote]]`: another machine's baton, followed through `ssh` or any `command`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRemote {
    pub name: String,
    pub ssh: Option<String>,
    pub ssh_options: Option<Vec<String>>,
    pub remote_baton: Option<String>,
    pub command: Option<Vec<String>>,
}
