//! The delivery sinks, one line each (`sink::for_each_sink!`, in `sink/mod.rs`), as the
//! agents are one line in `provider::ALL`. Each sink describes itself ([`SinkKind`]) in its own file: its config
//! section (as written, validated, printed), and how its section becomes sinks. What the
//! line generates (see `define_registry!`) is all that `config`, `daemon::settings` and
//! `daemon::build_sinks` know of sinks: they loop over it.
//!
//! The hold (background tasks, the grace of questions, scheduled turns) is put in front of
//! every sink here, once ([`Wiring`]).

use super::SinkError;
use super::delivery::{Counting, Courier, Delivered};
use super::desktop::Board;
use super::hold::Pages;
pub use super::section::Bad;
use std::fmt;
use std::time::Duration;

/// One kind of delivery sink: a [`Courier`] that also owns its config section.
pub trait SinkKind: Courier + Sized {
    /// The section as written in the config file (serde; unknown keys rejected).
    type Raw: serde::de::DeserializeOwned + fmt::Debug;
    /// The section validated, every default filled in; `Default` is the section absent.
    type Config: Clone + fmt::Debug + Default + PartialEq;

    /// Validates `raw` into `cfg` (which holds the defaults). `earlier` holds the sections
    /// of the sinks registered before this one (the webhook takes the desktop's
    /// priorities). Errors name the key (`webhook[0].url`).
    fn parse(raw: Self::Raw, cfg: &mut Self::Config, earlier: &Sinks) -> Result<(), Bad>;

    /// Appends the section as `baton config` prints it, with a comment on every key.
    fn write(cfg: &Self::Config, out: &mut String);

    /// The sinks the section asks for (none when it is off, one per `[[webhook]]`),
    /// before the hold: [`Wiring`] adds that.
    fn build(cfg: &Self::Config, board: &Board) -> Result<Vec<Delivered<Self>>, SinkError>;
}

/// What every sink is built with.
pub struct Wiring<'a> {
    /// The mutes and the log of held pages, shared with `status` and `baton mute`.
    pub board: &'a Board,
    /// How long a completion's page waits for background tasks (`hold_background`).
    pub hold: Duration,
    /// The other page rules (`needs_input_grace`, `page_scheduled`).
    pub pages: Pages,
}

impl Wiring<'_> {
    /// Builds `K`'s sinks from `cfg`, each behind the hold, into `out`.
    pub fn add<K: SinkKind>(
        &self,
        cfg: &K::Config,
        out: &mut Vec<Box<dyn Counting>>,
    ) -> Result<(), SinkError> {
        for s in K::build(cfg, self.board)? {
            out.push(Box::new(s.with_hold(self.hold).with_pages(self.pages)));
        }
        Ok(())
    }
}

/// Generates, for a list of `key => field: Kind` lines: [`Sinks`] (every section
/// validated, as the field), `RawSinks` (every section as written, as the key), and
/// `Sinks::{KEYS, parse, write, build}`, which follow the list's order. The list is
/// `sink::for_each_sink!`.
macro_rules! define_registry {
    ($($key:ident => $field:ident : $kind:ty,)*) => {
        /// Every sink's validated section, in registry order.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Sinks {
            $(pub $field: <$kind as $crate::sink::registry::SinkKind>::Config,)*
        }

        /// Every sink's section as written (`None`: absent).
        #[derive(Debug, Default)]
        pub struct RawSinks {
            $(pub $key: Option<<$kind as $crate::sink::registry::SinkKind>::Raw>,)*
        }

        impl Sinks {
            /// The sections' keys in the config file, in order.
            pub const KEYS: &[&str] = &[$(stringify!($key),)*];

            /// Validates every section present, in order.
            pub fn parse(raw: RawSinks) -> Result<Sinks, $crate::sink::registry::Bad> {
                let mut sinks = Sinks::default();
                $(
                    if let Some(r) = raw.$key {
                        let mut cfg = std::mem::take(&mut sinks.$field);
                        <$kind as $crate::sink::registry::SinkKind>::parse(r, &mut cfg, &sinks)?;
                        sinks.$field = cfg;
                    }
                )*
                Ok(sinks)
            }

            /// Every section as `baton config` prints it.
            pub fn write(&self, out: &mut String) {
                $(<$kind as $crate::sink::registry::SinkKind>::write(&self.$field, out);)*
            }

            /// Every sink the sections ask for, each behind the hold.
            pub fn build(
                &self,
                on: &$crate::sink::registry::Wiring,
            ) -> Result<
                Vec<Box<dyn $crate::sink::delivery::Counting>>,
                $crate::sink::SinkError,
            > {
                let mut out = Vec::new();
                $(on.add::<$kind>(&self.$field, &mut out)?;)*
                Ok(out)
            }
        }
    };
}

super::for_each_sink!(define_registry);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_registry_names_every_sink() {
        assert_eq!(Sinks::KEYS, ["desktop", "on_event", "webhook"]);
    }

    /// A sink written the way the checklist in ARCHITECTURE.md says: one file's worth
    /// (its section, its stats, its courier), and one line in a registry.
    mod toy {
        use super::super::*;
        use crate::model::Event;
        use crate::sink::section::toml_str;
        use std::sync::{Arc, Mutex};
        use std::time::Instant;

        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct RawToy {
            pub name: String,
        }

        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct ToyConfig {
            pub name: Option<String>,
            /// What the pages went to (shared with the test).
            pub log: Log,
        }

        #[derive(Debug, Clone, Default)]
        pub struct Log(pub Arc<Mutex<Vec<String>>>);

        impl PartialEq for Log {
            fn eq(&self, other: &Log) -> bool {
                Arc::ptr_eq(&self.0, &other.0)
            }
        }

        /// A toy counts in its log; a real sink's counters are a set in `diag`.
        impl crate::diag::Deliveries for Log {
            fn delivered(&self) -> u64 {
                self.0.lock().unwrap().len() as u64
            }
            fn failed(&self) -> u64 {
                0
            }
        }

        pub struct Toy {
            log: Log,
        }

        impl Courier for Toy {
            type Stats = u64;
            const NAME: &'static str = "toy";
            fn page(&mut self, ev: &Event, _now: Instant) {
                self.log.0.lock().unwrap().push(ev.id.clone());
            }
            fn stats(&self) -> u64 {
                self.log.0.lock().unwrap().len() as u64
            }
            fn counters(&self) -> Arc<dyn crate::diag::Deliveries> {
                Arc::new(self.log.clone())
            }
            fn finish(self, _deadline: Instant) -> (u64, bool) {
                (self.stats(), true)
            }
        }

        impl SinkKind for Toy {
            type Raw = RawToy;
            type Config = ToyConfig;
            fn parse(raw: RawToy, cfg: &mut ToyConfig, _: &Sinks) -> Result<(), Bad> {
                if raw.name.is_empty() {
                    return Err(("toy.name".to_owned(), "is empty".to_owned()));
                }
                cfg.name = Some(raw.name);
                Ok(())
            }
            fn write(cfg: &ToyConfig, out: &mut String) {
                if let Some(n) = &cfg.name {
                    out.push_str(&format!("[toy]\nname = {}\n", toml_str(n)));
                }
            }
            fn build(cfg: &ToyConfig, _: &Board) -> Result<Vec<Delivered<Toy>>, SinkError> {
                Ok(cfg
                    .name
                    .iter()
                    .map(|_| {
                        Delivered::with_courier(Toy {
                            log: cfg.log.clone(),
                        })
                    })
                    .collect())
            }
        }
    }

    /// The toy goes through what the registry line generates for each sink: its section
    /// parsed (unknown keys refused), printed, and built behind the hold.
    #[test]
    fn a_toy_sink_registers_through_the_same_path() {
        use crate::model::{EventKind, ProviderKind};
        use std::time::Instant;
        use toy::{RawToy, Toy, ToyConfig};
        let earlier = Sinks::default();
        let mut cfg = ToyConfig::default();
        let raw: RawToy = toml::from_str("name = \"first\"").unwrap();
        Toy::parse(raw, &mut cfg, &earlier).unwrap();
        let mut printed = String::new();
        Toy::write(&cfg, &mut printed);
        assert_eq!(printed, "[toy]\nname = \"first\"\n");
        let bad: RawToy = toml::from_str("name = \"\"").unwrap();
        assert_eq!(
            Toy::parse(bad, &mut ToyConfig::default(), &earlier).unwrap_err(),
            ("toy.name".to_owned(), "is empty".to_owned())
        );
        assert!(
            toml::from_str::<RawToy>("name = \"x\"\ncolour = 1").is_err(),
            "unknown keys are refused"
        );

        // Both waits at zero: what the defaults (10 minutes, 1.5 s) would hold back goes
        // out, so this also shows `Wiring` put the settings' hold in front of the sink.
        let board = Board::default();
        let on = Wiring {
            board: &board,
            hold: Duration::ZERO,
            pages: Pages {
                needs_input_grace: Duration::ZERO,
                page_scheduled: false,
            },
        };
        let mut built = Vec::new();
        on.add::<Toy>(&ToyConfig::default(), &mut built).unwrap();
        assert!(built.is_empty(), "no section, no sink");
        on.add::<Toy>(&cfg, &mut built).unwrap();
        assert_eq!(built.len(), 1);
        let sink = &mut built[0];
        assert_eq!(sink.name(), "toy");
        let path = "/h/.claude/projects/-h-app/s.jsonl";
        let asked = crate::naming::tests::event(EventKind::NeedsInput, ProviderKind::Claude, path);
        sink.deliver(&asked);
        assert_eq!(
            sink.counts(),
            (1, 0),
            "no grace: the question pages at once"
        );
        let mut done =
            crate::naming::tests::event(EventKind::TurnCompleted, ProviderKind::Claude, path);
        done.id = "id2".to_owned();
        done.session = Some("other".to_owned());
        done.background_tasks = Some(1);
        sink.deliver(&done);
        assert_eq!(sink.counts(), (1, 0), "held for its background task");
        assert!(sink.tick(Instant::now()).is_none(), "the hold ran out");
        assert_eq!(sink.counts(), (2, 0));
        assert_eq!(*cfg.log.0.lock().unwrap(), ["id1", "id2"]);
    }
}
