//! Resolved settings. The environment is read here and nowhere downstream.
//!
//! The config file (TOML, `$XDG_CONFIG_HOME/baton/config.toml` or `--config FILE`) is
//! parsed into a [`RawConfig`] that rejects unknown keys, then validated into a
//! [`Config`] with every default filled in. Flags override it (see `daemon::Settings`).

mod dirs;
mod raw;
mod remote;

pub use crate::sink::section::fmt_duration;
pub(crate) use dirs::env_dir;
use dirs::home;
pub use dirs::{default_config_path, default_roots, default_state_dir, socket_for, socket_path};
pub use raw::RawConfig;

use crate::error::Error;
use crate::model::ProviderKind;
use crate::sink::for_each_sink;
use crate::sink::registry::{SinkKind, Sinks};
use crate::sink::section::{Bad, duration, ms_of, toml_list, toml_str};
use crate::tail::DEFAULT_MAX_LINE_BYTES;
use crate::watch::{Root, WatcherMode};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Default quiet time before a working session's writer is looked for
/// (`liveness_after`).
pub const DEFAULT_LIVENESS_AFTER_MS: u64 = 2 * 60_000;
/// `tail` clients the socket serves at once by default (`max_followers`); more are refused.
pub const DEFAULT_MAX_FOLLOWERS: usize = 64;

macro_rules! config {
    ($($key:ident => $field:ident : $kind:ty,)*) => {
        /// The validated configuration, defaults filled in. Each delivery sink's section
        /// is a field (named in `sink::registry`), of the sink's own type.
        #[derive(Debug, Clone)]
        pub struct Config {
            /// The file it came from, if any.
            pub source: Option<PathBuf>,
            pub default_roots: bool,
            /// Extra roots (`watch`).
            pub watch: Vec<Root>,
            /// `None`: stdout.
            pub events: Option<PathBuf>,
            pub watcher: WatcherMode,
            pub poll_interval_ms: u64,
            pub settle_ms: u64,
            pub catch_up_ms: u64,
            /// How long a completion's page waits for its session's background tasks.
            pub hold_background_ms: u64,
            /// How long a `needs_input` page waits for an answer that makes it moot.
            pub needs_input_grace_ms: u64,
            /// Whether a scheduled turn's completion pages.
            pub page_scheduled: bool,
            /// How long a working session stays quiet before its writer is looked for.
            pub liveness_after_ms: u64,
            pub max_line_bytes: usize,
            /// `baton tail` clients the daemon serves at once.
            pub max_followers: usize,
            $(pub $field: <$kind as SinkKind>::Config,)*
            /// Where the daemon listens (not configurable: clients must find it).
            pub socket: Option<PathBuf>,
            /// Other machines whose events come here (`[[remote]]`).
            pub remotes: Vec<crate::remote::RemoteConfig>,
            /// Where `/metrics` is served; `None`: no listener.
            pub metrics: Option<std::net::SocketAddr>,
            /// Whether `metrics` may be a non-loopback address.
            pub metrics_allow_remote: bool,
        }

        impl Default for Config {
            fn default() -> Self {
                Config {
                    source: None,
                    default_roots: true,
                    watch: Vec::new(),
                    events: None,
                    watcher: WatcherMode::Auto,
                    poll_interval_ms: 2_000,
                    settle_ms: crate::reduce::DEFAULT_SETTLE_MS,
                    catch_up_ms: 10 * 60_000,
                    hold_background_ms: ms_of(crate::sink::hold::DEFAULT_HOLD_BACKGROUND),
                    needs_input_grace_ms: ms_of(crate::sink::hold::DEFAULT_NEEDS_INPUT_GRACE),
                    page_scheduled: false,
                    liveness_after_ms: DEFAULT_LIVENESS_AFTER_MS,
                    max_line_bytes: DEFAULT_MAX_LINE_BYTES,
                    max_followers: DEFAULT_MAX_FOLLOWERS,
                    $($field: Default::default(),)*
                    remotes: Vec::new(),
                    socket: socket_path(),
                    metrics: None,
                    metrics_allow_remote: false,
                }
            }
        }

        impl Config {
            /// The sinks' sections, taken out (for the daemon's settings).
            pub fn take_sinks(&mut self) -> Sinks {
                Sinks {
                    $($field: std::mem::take(&mut self.$field),)*
                }
            }

            fn put_sinks(&mut self, s: Sinks) {
                $(self.$field = s.$field;)*
            }

            /// A copy of the sinks' sections (for printing them).
            fn sinks(&self) -> Sinks {
                Sinks {
                    $($field: self.$field.clone(),)*
                }
            }
        }
    };
}
for_each_sink!(config);

/// A `~/` at the start means the home directory, which must then be known (an absolute
/// `HOME`).
fn expand(s: &str) -> Result<PathBuf, String> {
    match (s.strip_prefix("~/"), home()) {
        (Some(rest), Some(h)) => Ok(h.join(rest)),
        (Some(_), None) => Err(format!(
            "`{s}` starts with ~/, but HOME is not set to an absolute path"
        )),
        (None, _) => Ok(PathBuf::from(s)),
    }
}

/// Parses `PROVIDER=DIR` (a `--watch` value or a `watch` entry).
pub fn parse_watch(s: &str) -> Result<Root, String> {
    let (provider, dir) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not PROVIDER=DIR (e.g. claude=~/.claude/projects)"))?;
    let provider = match provider {
        "auto" => None,
        p => Some(ProviderKind::parse(p).ok_or_else(|| {
            format!(
                "unknown provider `{p}` ({} or auto)",
                crate::provider::descriptor::ids()
            )
        })?),
    };
    if dir.is_empty() {
        return Err(format!("`{s}` names no directory"));
    }
    let path = std::path::absolute(expand(dir)?).map_err(|e| format!("`{dir}`: {e}"))?;
    Ok(Root { path, provider })
}

fn parse_watcher(s: &str) -> Result<WatcherMode, String> {
    match s {
        "auto" => Ok(WatcherMode::Auto),
        "native" => Ok(WatcherMode::Native),
        "poll" => Ok(WatcherMode::Poll),
        _ => Err(format!("unknown watcher `{s}` (auto, native or poll)")),
    }
}

/// Parses `metrics = "HOST:PORT"`: a loopback address unless remote scrapes are allowed,
/// since the series name the agents and machines in use, and there is no authentication.
pub fn parse_metrics(s: &str, allow_remote: bool) -> Result<std::net::SocketAddr, String> {
    let addr: std::net::SocketAddr = s
        .parse()
        .map_err(|_| format!("`{s}` is not IP:PORT (e.g. 127.0.0.1:9464)"))?;
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(format!(
            "`{s}` is not a loopback address; the metrics have no authentication, so \
             serving them beyond this machine needs metrics_allow_remote = true"
        ));
    }
    Ok(addr)
}

impl Config {
    /// Loads `explicit`, or the default file if it exists, or nothing. An explicit file
    /// must exist.
    pub fn load(explicit: Option<&Path>) -> Result<Config, Error> {
        let path = match explicit {
            Some(p) => Some(p.to_path_buf()),
            None => default_config_path().filter(|p| p.exists()),
        };
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            Error::Usage(format!(
                "cannot read the config file {}: {e}",
                path.display()
            ))
        })?;
        Config::parse(&text, &path)
    }

    /// Parses and validates `text`; errors name `file` and the key.
    pub fn parse(text: &str, file: &Path) -> Result<Config, Error> {
        let raw: RawConfig = toml::from_str(text)
            .map_err(|e| Error::Usage(format!("config file {}: {e}", file.display())))?;
        Config::from_raw(raw)
            .map_err(|(key, msg)| {
                Error::Usage(format!("config file {}: `{key}`: {msg}", file.display()))
            })
            .map(|mut c| {
                c.source = Some(file.to_path_buf());
                c
            })
    }

    fn from_raw(mut raw: RawConfig) -> Result<Config, Bad> {
        let mut c = Config::default();
        let sinks = raw.take_sinks();
        let dur = duration;
        if let Some(b) = raw.default_roots {
            c.default_roots = b;
        }
        for w in raw.watch.unwrap_or_default() {
            let r = parse_watch(&w).map_err(|e| ("watch".to_owned(), e))?;
            if !c.watch.contains(&r) {
                c.watch.push(r);
            }
        }
        if let Some(e) = raw.events {
            c.events = match e.as_str() {
                "-" => None,
                path => Some(expand(path).map_err(|m| ("events".to_owned(), m))?),
            };
        }
        if let Some(w) = raw.watcher {
            c.watcher = parse_watcher(&w).map_err(|e| ("watcher".to_owned(), e))?;
        }
        if let Some(ms) = dur("poll_interval", &raw.poll_interval, true)? {
            c.poll_interval_ms = ms;
        }
        if let Some(ms) = dur("settle", &raw.settle, false)? {
            c.settle_ms = ms;
        }
        if let Some(ms) = dur("catch_up", &raw.catch_up, false)? {
            c.catch_up_ms = ms;
        }
        if let Some(ms) = dur("hold_background", &raw.hold_background, false)? {
            c.hold_background_ms = ms;
        }
        if let Some(ms) = dur("needs_input_grace", &raw.needs_input_grace, false)? {
            c.needs_input_grace_ms = ms;
        }
        if let Some(b) = raw.page_scheduled {
            c.page_scheduled = b;
        }
        if let Some(ms) = dur("liveness_after", &raw.liveness_after, true)? {
            c.liveness_after_ms = ms;
        }
        if let Some(n) = raw.max_line_bytes {
            if n == 0 {
                return Err(("max_line_bytes".to_owned(), "must be positive".to_owned()));
            }
            c.max_line_bytes = n;
        }
        if let Some(n) = raw.max_followers {
            if n == 0 {
                return Err(("max_followers".to_owned(), "must be at least 1".to_owned()));
            }
            c.max_followers = n;
        }
        c.metrics_allow_remote = raw.metrics_allow_remote.unwrap_or(false);
        if let Some(m) = raw.metrics {
            c.metrics = Some(
                parse_metrics(&m, c.metrics_allow_remote).map_err(|e| ("metrics".to_owned(), e))?,
            );
        }
        c.put_sinks(Sinks::parse(sinks)?);
        c.remotes = remote::parse(raw.remote.unwrap_or_default())?;
        Ok(c)
    }

    /// The effective configuration as TOML, with a comment on every key.
    pub fn to_toml(&self) -> String {
        let q = toml_str;
        let list = toml_list;
        let mut o = String::new();
        let src = match &self.source {
            Some(p) => format!("# Effective baton configuration (from {}).\n", p.display()),
            None => {
                "# Effective baton configuration (built-in defaults; no config file).\n".to_owned()
            }
        };
        o.push_str(&src);
        o.push_str("# Command-line flags of `baton run` override these values.\n\n");
        let _ = writeln!(
            o,
            "# Watch ~/.claude/projects and ~/.codex/sessions (or $CLAUDE_CONFIG_DIR/projects,\n\
             # $CODEX_HOME/sessions), ~/.cursor/projects, ~/.copilot/session-state\n\
             # ($COPILOT_HOME), ~/.pi/agent/sessions ($PI_CODING_AGENT_SESSION_DIR,\n\
             # $PI_CODING_AGENT_DIR), ~/.omp/agent/sessions, ~/.gemini/tmp ($GEMINI_CLI_HOME)\n\
             # and ~/.qwen/projects ($QWEN_RUNTIME_DIR, $QWEN_HOME) when they exist.\n\
             default_roots = {}",
            self.default_roots
        );
        let watch: Vec<String> = self
            .watch
            .iter()
            .map(|r| {
                let p = r.provider.map_or("auto", ProviderKind::as_str);
                format!("{p}={}", r.path.display())
            })
            .collect();
        let _ = writeln!(
            o,
            "# More transcript directories, as \"PROVIDER=DIR\" (claude, codex, norma, sgme,\n\
             # cursor, copilot, pi, gemini, qwen, auto).\n\
             watch = {}",
            list(&watch)
        );
        let events = self
            .events
            .as_ref()
            .map_or("-".to_owned(), |p| p.display().to_string());
        let _ = writeln!(
            o,
            "# Where the JSON Lines event stream goes: a file to append to, or \"-\" for stdout.\n\
             events = {}",
            q(&events)
        );
        let watcher = match self.watcher {
            WatcherMode::Auto => "auto",
            WatcherMode::Native => "native",
            WatcherMode::Poll => "poll",
        };
        let _ = writeln!(
            o,
            "# How changes are noticed: auto, native (inotify + polling) or poll (network mounts).\n\
             watcher = {}",
            q(watcher)
        );
        let _ = writeln!(
            o,
            "# How often recently active files are stat'ed, whatever the watcher says.\n\
             poll_interval = {}",
            q(&fmt_duration(self.poll_interval_ms))
        );
        let _ = writeln!(
            o,
            "# Quiet period after which a final answer with no end marker counts as complete.\n\
             settle = {}",
            q(&fmt_duration(self.settle_ms))
        );
        let _ = writeln!(
            o,
            "# Turns older than this are history: they update state but notify nobody.\n\
             catch_up = {}",
            q(&fmt_duration(self.catch_up_ms))
        );
        let _ = writeln!(
            o,
            "# How long a completion's page waits while background tasks it launched still run.\n\
             hold_background = {}",
            q(&fmt_duration(self.hold_background_ms))
        );
        let _ = writeln!(
            o,
            "# How long a question's page waits: one answered sooner (a rule approving a tool)\n\
             # never pages.\n\
             needs_input_grace = {}",
            q(&fmt_duration(self.needs_input_grace_ms))
        );
        let _ = writeln!(
            o,
            "# Whether the completion of a scheduled turn (a /loop or cron job nobody typed) pages.\n\
             page_scheduled = {}",
            self.page_scheduled
        );
        let _ = writeln!(
            o,
            "# Quiet time after which a working session's agent process is looked for.\n\
             liveness_after = {}",
            q(&fmt_duration(self.liveness_after_ms))
        );
        let _ = writeln!(
            o,
            "# Longest transcript line parsed, in bytes; longer ones are skipped as anomalies.\n\
             max_line_bytes = {}",
            self.max_line_bytes
        );
        let _ = writeln!(
            o,
            "# `baton tail` clients served at once; more are refused (`status` always answers).\n\
             max_followers = {}\n",
            self.max_followers
        );
        let metrics = self.metrics.map_or_else(
            || "# metrics = \"127.0.0.1:9464\"".to_owned(),
            |a| format!("metrics = {}", q(&a.to_string())),
        );
        let _ = writeln!(
            o,
            "# Serve Prometheus metrics at http://ADDR/metrics (off when unset).\n\
             {metrics}\n\
             # Whether `metrics` may be a non-loopback address (the endpoint has no authentication).\n\
             {}metrics_allow_remote = {}\n",
            if self.metrics_allow_remote { "" } else { "# " },
            self.metrics_allow_remote
        );
        self.sinks().write(&mut o);
        o.push('\n');
        remote::write(&mut o, &self.remotes);
        o
    }
}
