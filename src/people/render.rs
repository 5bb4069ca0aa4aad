//! The person's table as text: columns sized to what they hold, the last message cut
//! to the terminal's width, the state in colour on a terminal.

use super::{ColorChoice, Filter, STATES, Shown, TableArgs, View, rank};
use crate::text::cut;
use std::io::IsTerminal;

/// Width when neither `COLUMNS` nor the terminal says.
const DEFAULT_WIDTH: usize = 100;
/// Longest project name before it is cut.
const PROJECT_MAX: usize = 28;
/// Longest branch name before it is cut.
const BRANCH_MAX: usize = 24;
const GAP: &str = "  ";

/// How a table is to be shown: resolved once from the flags and the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub filter: Filter,
    pub colour: bool,
    pub width: usize,
    pub now: i64,
    /// `status`: at most this many rows ([`rows`]); `None` with `--all`. `scan` shows
    /// every row.
    pub rows: Option<usize>,
}

impl Table {
    /// From `--state`/`--project`/`--agent`/`--all`/`--color`, the environment and
    /// stdout.
    pub fn from_args(args: &TableArgs) -> Table {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let terminal = std::io::stdout().is_terminal();
        Table {
            filter: Filter {
                states: args.state.clone(),
                project: args.project.clone(),
                agent: args.agent,
                branch: args.branch.clone(),
                all: args.all,
            },
            colour: use_colour(args.color, terminal, no_color),
            width: width(),
            now: now(),
            rows: (!args.all).then(|| rows(terminal.then(height).flatten())),
        }
    }
}

/// `--color`: `always` and `never` as said; `auto` colours a terminal unless `NO_COLOR`
/// is set (a flag is the person asking, so it wins over the environment).
pub fn use_colour(choice: ColorChoice, terminal: bool, no_color: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && !no_color,
    }
}

/// Unix ms for ages: the wall clock, or `BATON_NOW_MS` — a hidden knob for golden
/// tests, which need one "now" to compare a table against.
pub fn now() -> i64 {
    std::env::var("BATON_NOW_MS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(crate::clock::wall_now)
}

/// Columns to fill: `COLUMNS`, else the width of the terminal on stdout, else 100.
pub fn width() -> usize {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    rustix::termios::tcgetwinsize(std::io::stdout())
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_WIDTH)
}

/// Rows of a `status` table when stdout is no terminal (a file, a pipe): a long
/// screenful; `--all` shows every row and `--json` is for programs.
pub const DEFAULT_ROWS: usize = 100;
/// Lines of a terminal kept for what goes around the table: its header, the `… and N
/// more` and `older sessions` lines, the blank line between, and the prompt after.
const AROUND_TABLE: usize = 5;
/// The fewest rows a terminal table shows, however short the terminal.
const MIN_ROWS: usize = 5;

/// How many rows a `status` table shows: what fits a terminal of `height` lines, or
/// [`DEFAULT_ROWS`] when stdout is no terminal (`None`).
pub fn rows(height: Option<usize>) -> usize {
    height.map_or(DEFAULT_ROWS, |h| {
        h.saturating_sub(AROUND_TABLE).max(MIN_ROWS)
    })
}

/// The terminal's height in lines: `LINES`, else the terminal on stdout.
fn height() -> Option<usize> {
    std::env::var("LINES")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .or_else(|| {
            rustix::termios::tcgetwinsize(std::io::stdout())
                .ok()
                .map(|w| usize::from(w.ws_row))
                .filter(|n| *n > 0)
        })
}

/// The ANSI SGR parameters of a state's colour.
pub fn state_sgr(state: &str) -> &'static str {
    match state {
        "needs_input" => "1;33",
        "failed" => "1;31",
        "completed" => "32",
        "working" => "36",
        "interrupted" => "35",
        _ => "2",
    }
}

/// Untrusted text on one line: escapes and control characters gone, whitespace runs
/// made one space.
fn flat(s: &str) -> String {
    crate::text::one_line(s)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("+{n} {}", if n == 1 { one } else { many })
}

/// What a row carries besides its own state: its subagents still working, waiting or
/// failed (finished ones are folded in silently), and background tasks still running.
/// E.g. `+2 subagents working, +1 background task running`.
pub fn note(s: &Shown) -> String {
    let mut counts = [0usize; STATES.len() + 1];
    for sub in &s.subagents {
        counts[rank(&sub.state)] += 1;
    }
    let mut parts = Vec::new();
    for (state, &n) in STATES.iter().zip(&counts) {
        let part = match (*state, n) {
            (_, 0) | ("completed" | "interrupted", _) => continue,
            ("needs_input", _) => plural(n, "subagent needs you", "subagents need you"),
            (other, _) => format!("{} {other}", plural(n, "subagent", "subagents")),
        };
        parts.push(part);
    }
    match s.row.background_tasks {
        0 => {}
        1 => parts.push("+1 background task running".to_owned()),
        n => parts.push(format!("+{n} background tasks running")),
    }
    parts.join(", ")
}

/// A row's cells, plain: state, agent, project, age, and the note and last message on
/// one line (not cut).
pub fn cells(s: &Shown, now: i64) -> [String; 5] {
    let agent = crate::naming::agent_name(s.row.provider).to_owned();
    let age = s
        .row
        .at
        .map(|t| crate::clock::age(t, now))
        .unwrap_or_default();
    let message = flat(&s.row.message);
    let mut note = note(s);
    if let Some(id) = &s.row.subagent {
        // A subagent whose parent is not in view: say whose row this is.
        note = format!("subagent {}", flat(id));
    }
    let last = match (note.is_empty(), message.is_empty()) {
        (true, _) => message,
        (false, true) => note,
        (false, false) => format!("{note} · {message}"),
    };
    let state = match &s.row.reason {
        Some(r) => format!("{} ({})", flat(&s.row.state), flat(r)),
        None => flat(&s.row.state),
    };
    [state, agent, flat(&s.project), age, last]
}

/// `s` left-aligned in `w` columns, coloured with `sgr` if any.
fn pad(s: &str, w: usize, sgr: Option<&str>) -> String {
    let fill = " ".repeat(w.saturating_sub(s.chars().count()));
    match sgr {
        Some(code) => format!("\x1b[{code}m{s}\x1b[0m{fill}"),
        None => format!("{s}{fill}"),
    }
}

/// The table: a header, one line per shown row cut to `width` columns, then
/// `N older sessions: --all` and a `waiting for …` line per missing root. Empty when
/// there is nothing at all to show.
pub fn render(view: &View, width: usize, colour: bool, now: i64) -> String {
    let mut out = String::new();
    if !view.shown.is_empty() {
        // A BRANCH column after PROJECT only when a row is on a branch other than the
        // default one: tables of one-branch work read as before.
        let branched = view
            .shown
            .iter()
            .any(|s| crate::naming::shown_branch(s.row.branch.as_deref()).is_some());
        let mut head: Vec<String> = ["STATE", "AGENT", "PROJECT", "AGE", "LAST MESSAGE"]
            .map(str::to_owned)
            .to_vec();
        // Each column's widest cell allowed, but the last (cut to the room left).
        let mut caps = vec![usize::MAX, usize::MAX, PROJECT_MAX, usize::MAX];
        if branched {
            head.insert(3, "BRANCH".to_owned());
            caps.insert(3, BRANCH_MAX);
        }
        let rows: Vec<Vec<String>> = view
            .shown
            .iter()
            .map(|s| {
                let mut r = cells(s, now).to_vec();
                if branched {
                    r.insert(3, flat(s.row.branch.as_deref().unwrap_or("")));
                }
                r
            })
            .collect();
        let fixed = caps.len();
        let mut w = vec![0usize; fixed];
        for r in rows.iter().chain([&head]) {
            for (i, c) in r.iter().take(fixed).enumerate() {
                w[i] = w[i].max(c.chars().count()).min(caps[i]);
            }
        }
        let used: usize = w.iter().sum::<usize>() + fixed * GAP.len();
        let room = width.saturating_sub(used);
        for (i, r) in std::iter::once(&head).chain(&rows).enumerate() {
            let sgr = (colour && i > 0).then(|| state_sgr(&r[0]));
            let mut line: Vec<String> = r
                .iter()
                .take(fixed)
                .enumerate()
                .map(|(c, cell)| pad(&cut(cell, w[c]), w[c], if c == 0 { sgr } else { None }))
                .collect();
            line.push(cut(&r[fixed], room));
            let line = line.join(GAP);
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    let mut tail = Vec::new();
    if view.more > 0 {
        tail.push(format!(
            "… and {} more (baton status --all / --json)",
            view.more
        ));
    }
    if view.older > 0 {
        let what = if view.older == 1 {
            "older session"
        } else {
            "older sessions"
        };
        tail.push(format!("{} {what}: --all", view.older));
    }
    for wait in &view.waiting {
        let provider = wait
            .provider
            .as_deref()
            .map(|p| format!(" ({})", flat(p)))
            .unwrap_or_default();
        tail.push(cut(
            &format!("waiting for {}{provider}", flat(&wait.path)),
            width,
        ));
    }
    if !tail.is_empty() && !out.is_empty() {
        out.push('\n');
    }
    for t in tail {
        out.push_str(&t);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Row;
    use super::*;

    fn shown(state: &str, subs: &[&str]) -> Shown {
        let row = |state: &str, sub: Option<&str>| Row {
            state: state.to_owned(),
            provider: Some(crate::model::ProviderKind::Claude),
            session: "s".to_owned(),
            subagent: sub.map(str::to_owned),
            project: "p".to_owned(),
            project_long: "x/p".to_owned(),
            at: Some(0),
            message: "m".to_owned(),
            background_tasks: 0,
            reason: None,
            branch: None,
        };
        Shown {
            row: row(state, None),
            project: "p".to_owned(),
            subagents: subs.iter().map(|s| row(s, Some("a"))).collect(),
        }
    }

    #[test]
    fn notes_count_subagents_by_state_and_skip_finished_ones() {
        assert_eq!(note(&shown("completed", &[])), "");
        assert_eq!(
            note(&shown("completed", &["working", "working", "completed"])),
            "+2 subagents working"
        );
        assert_eq!(
            note(&shown(
                "working",
                &["working", "needs_input", "interrupted"]
            )),
            "+1 subagent needs you, +1 subagent working"
        );
    }

    #[test]
    fn a_branch_column_only_when_a_row_is_off_the_default_branch() {
        let mut a = shown("completed", &[]);
        a.row.branch = Some("main".to_owned());
        let mut b = shown("working", &[]);
        b.row.session = "t".to_owned();
        let view = |shown: Vec<Shown>| View {
            shown,
            ..View::default()
        };
        let plain = render(&view(vec![a.clone(), b.clone()]), 100, false, 0);
        assert!(!plain.contains("BRANCH"), "{plain}");
        assert!(plain.starts_with("STATE      AGENT        PROJECT  AGE       LAST MESSAGE\n"));
        b.row.branch = Some("feat/\u{1b}[31mlogin-with-a-very-long-branch-name".to_owned());
        let text = render(&view(vec![a, b]), 100, false, 0);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("STATE      AGENT        PROJECT  BRANCH                    AGE"),
            "{text}"
        );
        assert!(lines[1].contains("  main  "), "{text}");
        assert!(lines[2].contains("  feat/login-with-a-very-…  "), "{text}");
        assert!(!text.contains('\u{1b}'));
    }

    #[test]
    fn cut_keeps_short_text_and_marks_a_cut() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "ab…");
        assert_eq!(cut("abcd", 0), "");
    }

    #[test]
    fn colour_follows_the_flag_then_the_terminal_and_no_color() {
        use super::ColorChoice::{Always, Auto, Never};
        assert!(use_colour(Always, false, true));
        assert!(!use_colour(Never, true, false));
        assert!(use_colour(Auto, true, false));
        assert!(!use_colour(Auto, true, true));
        assert!(!use_colour(Auto, false, false));
    }
}
