//! `baton status --format waybar|i3bar|plain`: the sessions summed up in one line for a
//! status bar ("2 need you · 1 working"), and with `--watch` a new line on every change.
//!
//! It stands on what `status --watch` stands on: the daemon's `status` rows at each
//! (re)connection, kept up to date by its event stream ([`super::feed`] into a
//! [`View`]). What the line says is pure ([`summary`], [`Bar::line`]; `now` is an
//! argument). While the daemon is not running the line says so (class `down`) and the
//! feeder keeps trying, so the bar never dies with the daemon.

use super::Feed;
use super::state::View;
use crate::error::Error;
use crate::people;
use serde_json::{Map, Value, json};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

/// `status --format`: which status bar the line is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BarFormat {
    /// waybar's custom module with `return-type: json`: `{"text","tooltip","class"}`.
    Waybar,
    /// The i3bar protocol (i3bar, swaybar): a header, `[`, then one array of blocks per
    /// line.
    I3bar,
    /// Plain text, one line (polybar, i3blocks, tmux `status-right`).
    Plain,
}

/// How often the line is worked out again while the feed is quiet: a completed turn
/// leaves the bar `recent_ms` after it ended, with no event to say so.
const TICK: Duration = Duration::from_secs(1);
/// Sessions listed in the tooltip; more are one "… and N more" line.
const TOOLTIP_ROWS: usize = 10;
/// Longest project name in the tooltip.
const NAME_MAX: usize = 40;
/// What the bar shows while the daemon is not running.
const DOWN_TEXT: &str = "baton not running";
const DOWN_TIP: &str = "The baton daemon is not running (or its socket does not answer); \
                        trying again.";

/// How the bar is to be shown: from `status --format`, `--recent` and the table filters.
#[derive(Debug, Clone)]
pub struct Options {
    pub format: BarFormat,
    /// `--state`, `--project`, `--agent`, `--branch`, `--all`, as for the table.
    pub filter: people::Filter,
    /// How long a completed or failed turn counts as waiting for the person.
    pub recent_ms: u64,
}

/// The bar's class, most urgent first: the most urgent state any session is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    NeedsInput,
    Failed,
    Completed,
    Working,
    Idle,
    /// The daemon is not running.
    Down,
}

/// The classes that count sessions, in [`Bar::counts`] order.
const COUNTED: [Class; 4] = [
    Class::NeedsInput,
    Class::Failed,
    Class::Completed,
    Class::Working,
];

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::NeedsInput => "needs_input",
            Class::Failed => "failed",
            Class::Completed => "completed",
            Class::Working => "working",
            Class::Idle => "idle",
            Class::Down => "down",
        }
    }

    /// The i3bar colour (the table's state colours, as hex).
    fn colour(self) -> Option<&'static str> {
        match self {
            Class::NeedsInput => Some("#FFCC00"),
            Class::Failed => Some("#FF5555"),
            Class::Completed => Some("#55CC55"),
            Class::Working => Some("#55CCCC"),
            Class::Idle => None,
            Class::Down => Some("#888888"),
        }
    }

    /// "2 need you", "1 failed", "3 done", "1 working".
    fn part(self, n: usize) -> String {
        match self {
            Class::NeedsInput if n == 1 => "1 needs you".to_owned(),
            Class::NeedsInput => format!("{n} need you"),
            Class::Failed => format!("{n} failed"),
            Class::Completed => format!("{n} done"),
            _ => format!("{n} working"),
        }
    }
}

/// What the bar shows at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bar {
    pub class: Class,
    /// Sessions per [`COUNTED`] class.
    pub counts: [usize; 4],
    /// The tooltip, plain text, one entry a line (escaped for markup when written).
    pub tooltip: Vec<String>,
}

/// The class a shown row counts in, if any: a question until it is answered, a
/// completed or failed turn for `recent_ms` after it ended (one with no time always),
/// a working one while it works. Interrupted and stale sessions are not counted.
fn class_of(row: &people::Row, now: i64, recent_ms: u64) -> Option<Class> {
    let recent = || {
        row.at
            .is_none_or(|at| now.saturating_sub(at) <= i64::try_from(recent_ms).unwrap_or(i64::MAX))
    };
    match row.state.as_str() {
        "needs_input" => Some(Class::NeedsInput),
        "failed" if recent() => Some(Class::Failed),
        "completed" if recent() => Some(Class::Completed),
        "working" => Some(Class::Working),
        _ => None,
    }
}

/// Untrusted text for the tooltip: one printable line, capped.
fn clean(s: &str) -> String {
    crate::text::cut(&crate::text::one_line(s), NAME_MAX)
}

/// Sums up the person's view at `now`: counts per class, the most urgent class, and a
/// tooltip naming each session that waits (in the table's order, projects named as
/// the table names them) and since when, then the working ones.
pub fn summary(view: &people::View, now: i64, recent_ms: u64) -> Bar {
    let mut counts = [0usize; 4];
    let mut waits = Vec::new();
    let mut working = Vec::new();
    for s in &view.shown {
        let Some(class) = class_of(&s.row, now, recent_ms) else {
            continue;
        };
        if let Some(i) = COUNTED.iter().position(|c| *c == class) {
            counts[i] += 1;
        }
        let mut name = clean(&s.project);
        if let Some(b) = crate::naming::shown_branch(s.row.branch.as_deref()) {
            name = format!("{name} ({})", clean(b));
        }
        if class == Class::Working {
            working.push(name);
            continue;
        }
        let when = s.row.at.map(|at| crate::clock::local_time(at, now, false));
        let what = match (class, when) {
            (Class::NeedsInput, Some(t)) => format!("needs you since {t}"),
            (Class::NeedsInput, None) => "needs you".to_owned(),
            (Class::Failed, Some(t)) => format!("failed at {t}"),
            (Class::Failed, None) => "failed".to_owned(),
            (_, Some(t)) => format!("done at {t}, your turn"),
            (_, None) => "done, your turn".to_owned(),
        };
        let agent = crate::naming::agent_name(s.row.provider);
        waits.push(format!("{agent} · {name}: {what}"));
    }
    let mut tooltip: Vec<String> = waits.iter().take(TOOLTIP_ROWS).cloned().collect();
    if waits.len() > TOOLTIP_ROWS {
        tooltip.push(format!("… and {} more", waits.len() - TOOLTIP_ROWS));
    }
    if !working.is_empty() {
        let mut names: Vec<String> = working.iter().take(TOOLTIP_ROWS).cloned().collect();
        if working.len() > TOOLTIP_ROWS {
            names.push(format!("… and {} more", working.len() - TOOLTIP_ROWS));
        }
        tooltip.push(format!("working: {}", names.join(", ")));
    }
    if tooltip.is_empty() {
        tooltip.push("No agent needs you.".to_owned());
    }
    let class = COUNTED
        .iter()
        .zip(counts)
        .find(|(_, n)| *n > 0)
        .map_or(Class::Idle, |(c, _)| *c);
    Bar {
        class,
        counts,
        tooltip,
    }
}

impl Bar {
    /// The bar while the daemon is not running.
    pub fn down() -> Bar {
        Bar {
            class: Class::Down,
            counts: [0; 4],
            tooltip: vec![DOWN_TIP.to_owned()],
        }
    }

    /// "2 need you · 1 working"; empty when nothing is counted.
    pub fn text(&self) -> String {
        if self.class == Class::Down {
            return DOWN_TEXT.to_owned();
        }
        COUNTED
            .iter()
            .zip(self.counts)
            .filter(|(_, n)| *n > 0)
            .map(|(c, n)| c.part(n))
            .collect::<Vec<_>>()
            .join(" · ")
    }

    /// The most urgent part alone ("2 need you"), for a narrow bar.
    fn short_text(&self) -> String {
        if self.class == Class::Down {
            return "baton down".to_owned();
        }
        COUNTED
            .iter()
            .zip(self.counts)
            .find(|(_, n)| *n > 0)
            .map(|(c, n)| c.part(n))
            .unwrap_or_default()
    }

    /// The bar as one line in `format` (no newline; an i3bar array after the first
    /// takes a leading comma from the writer).
    pub fn line(&self, format: BarFormat) -> String {
        match format {
            BarFormat::Plain => self.text(),
            BarFormat::Waybar => json!({
                "text": self.text(),
                // waybar renders tooltips as Pango markup.
                "tooltip": crate::naming::escape_markup(&self.tooltip.join("\n")),
                "class": self.class.as_str(),
                "alt": self.class.as_str(),
            })
            .to_string(),
            BarFormat::I3bar => {
                let mut block = Map::new();
                block.insert("name".into(), "baton".into());
                block.insert("instance".into(), self.class.as_str().into());
                block.insert("full_text".into(), self.text().into());
                block.insert("short_text".into(), self.short_text().into());
                if let Some(c) = self.class.colour() {
                    block.insert("color".into(), c.into());
                }
                block.insert("urgent".into(), (self.class == Class::NeedsInput).into());
                Value::Array(vec![Value::Object(block)]).to_string()
            }
        }
    }
}

/// The i3bar protocol's header and the opening of its endless array.
const I3BAR_HEAD: &str = "{\"version\":1}\n[";

fn put(out: &mut impl Write, line: &str) -> Result<(), Error> {
    writeln!(out, "{line}")
        .and_then(|()| out.flush())
        .map_err(Error::Output)
}

/// `status --format`: one line (the `down` line when the daemon does not answer), or
/// with `watch` a line at the start and one on every change, until `out` is gone.
pub fn run(
    socket: Option<PathBuf>,
    opts: &Options,
    watch: bool,
    out: &mut impl Write,
) -> Result<(), Error> {
    if opts.format == BarFormat::I3bar {
        put(out, I3BAR_HEAD)?;
    }
    if !watch {
        let now = crate::clock::wall_now();
        let bar = match super::follow::status_rows(socket.as_deref()) {
            Ok((rows, _)) => {
                let mut view = View::default();
                view.set_status(&rows);
                summary(&view.people_view(&opts.filter, now), now, opts.recent_ms)
            }
            Err(e) => {
                eprintln!("baton: {e}");
                Bar::down()
            }
        };
        return put(out, &bar.line(opts.format));
    }
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("baton-feed".to_owned())
        .spawn(move || super::feed(socket, &tx))
        .map_err(|e| Error::Output(io::Error::other(format!("cannot start a thread: {e}"))))?;
    let mut view = View::default();
    // None until the feeder has said anything: nothing is printed before.
    let mut up: Option<bool> = None;
    let mut last: Option<String> = None;
    loop {
        let mut next = match rx.recv_timeout(TICK) {
            Ok(f) => Some(f),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(Error::Output(io::Error::other("the feed thread stopped")));
            }
        };
        // Everything that arrived is applied before the line is worked out, so a burst
        // of events is one line.
        while let Some(f) = next {
            match f {
                Feed::Status(rows, _) => {
                    view.set_status(&rows);
                    up = Some(true);
                }
                Feed::Event(ev) => {
                    view.apply(&ev);
                }
                Feed::Down(why) => {
                    if up != Some(false) {
                        eprintln!("baton: {why}; trying again.");
                    }
                    up = Some(false);
                }
            }
            next = rx.try_recv().ok();
        }
        let bar = match up {
            None => continue,
            Some(false) => Bar::down(),
            Some(true) => {
                let now = crate::clock::wall_now();
                summary(&view.people_view(&opts.filter, now), now, opts.recent_ms)
            }
        };
        let line = bar.line(opts.format);
        if last.as_deref() != Some(line.as_str()) {
            let comma = if opts.format == BarFormat::I3bar && last.is_some() {
                ","
            } else {
                ""
            };
            put(out, &format!("{comma}{line}"))?;
            last = Some(line);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::model::ProviderKind;

    const NOW: i64 = 1_800_000_000_000;
    const HOUR: u64 = 3_600_000;

    fn row(session: &str, project: &str, state: &str, ago_ms: i64) -> people::Row {
        people::Row {
            state: state.to_owned(),
            provider: Some(ProviderKind::Claude),
            session: session.to_owned(),
            subagent: None,
            project: project.to_owned(),
            project_long: format!("src/{project}"),
            at: Some(NOW - ago_ms),
            message: String::new(),
            background_tasks: 0,
            reason: None,
            branch: None,
        }
    }

    fn bar(rows: Vec<people::Row>) -> Bar {
        summary(
            &people::view(rows, &people::Filter::default(), NOW),
            NOW,
            HOUR,
        )
    }

    #[test]
    fn counts_each_class_and_names_the_most_urgent() {
        let b = bar(vec![
            row("a", "web", "needs_input", 60_000),
            row("b", "api", "needs_input", 5_000),
            row("c", "cli", "working", 1_000),
            row("d", "old", "completed", 2 * 3_600_000),
            row("e", "gone", "interrupted", 1_000),
        ]);
        assert_eq!(b.class, Class::NeedsInput);
        assert_eq!(b.text(), "2 need you · 1 working");
        assert_eq!(b.short_text(), "2 need you");
        // Newest first, as the table orders them; the completed turn of 2 h ago is no
        // news any more.
        assert!(b.tooltip[0].starts_with("Claude Code · api: needs you since "));
        assert!(b.tooltip[1].starts_with("Claude Code · web: needs you since "));
        assert_eq!(b.tooltip[2], "working: cli");
        assert_eq!(b.tooltip.len(), 3);
        let one = bar(vec![
            row("a", "web", "needs_input", 1),
            row("f", "x", "failed", 1),
        ]);
        assert_eq!(one.text(), "1 needs you · 1 failed");
    }

    #[test]
    fn nothing_counted_is_an_empty_idle_line() {
        let b = bar(vec![row("e", "gone", "interrupted", 1_000)]);
        assert_eq!(b.class, Class::Idle);
        assert_eq!(b.line(BarFormat::Plain), "");
        let w: Value = serde_json::from_str(&b.line(BarFormat::Waybar)).unwrap();
        assert_eq!(w["class"], "idle");
        assert_eq!(w["text"], "");
        assert_eq!(w["tooltip"], "No agent needs you.");
        let done = bar(vec![row("d", "web", "completed", 60_000)]);
        assert_eq!(done.class, Class::Completed);
        assert_eq!(done.text(), "1 done");
    }

    #[test]
    fn tooltips_escape_markup_and_strip_terminal_escapes() {
        let mut r = row("a", "<b>x</b>&\u{1b}[31my", "needs_input", 1_000);
        r.branch = Some("feat/<i>".to_owned());
        let w: Value = serde_json::from_str(&bar(vec![r]).line(BarFormat::Waybar)).unwrap();
        let tip = w["tooltip"].as_str().unwrap();
        assert!(
            tip.starts_with("Claude Code · &lt;b&gt;x&lt;/b&gt;&amp;y (feat/&lt;i&gt;): needs you"),
            "{tip}"
        );
        assert!(!tip.contains('\u{1b}'));
    }

    #[test]
    fn i3bar_blocks_and_the_down_line() {
        let b = bar(vec![row("a", "web", "needs_input", 1_000)]);
        let v: Value = serde_json::from_str(&b.line(BarFormat::I3bar)).unwrap();
        let block = &v[0];
        assert_eq!(block["name"], "baton");
        assert_eq!(block["full_text"], "1 needs you");
        assert_eq!(block["urgent"], true);
        assert_eq!(block["color"], "#FFCC00");
        let down: Value = serde_json::from_str(&Bar::down().line(BarFormat::Waybar)).unwrap();
        assert_eq!(down["class"], "down");
        assert_eq!(down["text"], DOWN_TEXT);
        assert_eq!(Bar::down().line(BarFormat::Plain), DOWN_TEXT);
    }

    #[test]
    fn the_tooltip_is_capped() {
        let rows = (0..15)
            .map(|i| row(&format!("s{i}"), &format!("p{i}"), "needs_input", i))
            .collect();
        let b = bar(rows);
        assert_eq!(b.tooltip.len(), TOOLTIP_ROWS + 1);
        assert_eq!(b.tooltip[TOOLTIP_ROWS], "… and 5 more");
        assert_eq!(b.text(), "15 need you");
    }
}
