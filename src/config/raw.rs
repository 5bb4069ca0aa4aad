//! The config file as written: every key optional, unknown keys rejected. Validated
//! into [`Config`](super::Config) by `mod.rs`. The delivery sinks' sections are their
//! own (see `sink::registry`): one field each, from the registry.

use crate::sink::for_each_sink;
use crate::sink::registry::{RawSinks, SinkKind};
use serde::Deserialize;

macro_rules! raw_config {
    ($($key:ident => $field:ident : $kind:ty,)*) => {
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
            $(pub $key: Option<<$kind as SinkKind>::Raw>,)*
            pub remote: Option<Vec<RawRemote>>,
        }

        impl RawConfig {
            /// The sinks' sections, taken out.
            pub fn take_sinks(&mut self) -> RawSinks {
                RawSinks {
                    $($key: self.$key.take(),)*
                }
            }
        }
    };
}
for_each_sink!(raw_config);

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
