//! The sessions as a person reads them, for `scan`, `status` and the live view: one row
//! per conversation, the ones waiting for the person first, subagents folded into their
//! parent's row, old sessions summarised. Pure: the caller passes `now` and the rows.
//!
//! Rows come from either source — a `scan`'s [`SessionView`]s or the daemon's `status`
//! answer — and go through the one [`view`] and the one [`render`], so both tables read
//! the same.

mod args;
mod fit;
mod render;

pub use args::{ColorChoice, TableArgs};
pub use fit::{Fit, Head, Matching};
pub use render::{Table, cells, render};

use crate::clock::parse_rfc3339;
use crate::model::ProviderKind;
use crate::reduce::SessionView;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// The states in the order a person wants them: what waits for them first.
pub const STATES: [&str; 6] = [
    "needs_input",
    "failed",
    "completed",
    "working",
    "interrupted",
    "stale",
];

/// Sessions idle longer than this are summarised in one line unless `--all`.
pub const OLD_MS: i64 = 7 * 86_400_000;

/// One session (or subagent) as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// One of [`STATES`] (another string sorts last and shows as it is).
    pub state: String,
    pub provider: Option<ProviderKind>,
    pub session: String,
    /// The subagent's id; `None` for the main conversation.
    pub subagent: Option<String>,
    /// The last component of the start directory (or the path's fallback name).
    pub project: String,
    /// The last two components, shown when another row in view shares `project`.
    pub project_long: String,
    /// Unix ms of the last record.
    pub at: Option<i64>,
    /// The last message as the transcript has it (the render cleans it).
    pub message: String,
    pub background_tasks: u64,
    /// Why the state is what it is, where the state alone does not say (`writer_gone`).
    pub reason: Option<String>,
    /// The git branch, where the agent records it.
    pub branch: Option<String>,
}

impl Row {
    /// A `scan` row at `now`: a working session silent for `after_ms` that liveness
    /// cannot judge shows as `stale`.
    pub fn from_view(v: &SessionView, now: i64, after_ms: u64) -> Row {
        Row {
            reason: v.reason.map(str::to_owned),
            state: v.shown_state(now, after_ms).to_owned(),
            provider: Some(v.key.provider),
            session: v.key.session.clone(),
            subagent: v.key.agent.clone(),
            project: crate::naming::view_project(v, 1),
            project_long: crate::naming::view_project(v, 2),
            at: v.record_ts,
            message: v.message.as_deref().unwrap_or_default().to_owned(),
            background_tasks: u64::from(v.background_tasks),
            branch: v.branch.clone(),
        }
    }

    /// One row of the daemon's `status` answer; `None` for the end line or anything
    /// that names no session.
    pub fn from_status(v: &Value) -> Option<Row> {
        let session = v["session"].as_str()?;
        let text = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        let project = text("project");
        Some(Row {
            state: text("state"),
            provider: v["provider"].as_str().and_then(ProviderKind::parse),
            session: session.to_owned(),
            subagent: v["agent"].as_str().map(str::to_owned),
            project_long: v["project_long"]
                .as_str()
                .map_or_else(|| project.clone(), str::to_owned),
            project,
            at: v["since"].as_str().and_then(parse_rfc3339),
            message: text("message"),
            background_tasks: v["background_tasks"].as_u64().unwrap_or(0),
            reason: v["reason"].as_str().map(str::to_owned),
            branch: v["branch"].as_str().map(str::to_owned),
        })
    }

    /// The row of one line of the daemon's `status` answer ([`StatusLine`]), as
    /// [`Row::from_status`] reads it from a parsed line.
    pub fn from_status_line(l: &StatusLine<'_>) -> Option<Row> {
        let session = l.session.as_deref()?;
        let text = |s: &Option<Cow<'_, str>>| s.as_deref().unwrap_or_default().to_owned();
        let project = text(&l.project);
        Some(Row {
            state: text(&l.state),
            provider: l.provider.as_deref().and_then(ProviderKind::parse),
            session: session.to_owned(),
            subagent: l.agent.as_deref().map(str::to_owned),
            project_long: l
                .project_long
                .as_deref()
                .map_or_else(|| project.clone(), str::to_owned),
            project,
            at: l.since.as_deref().and_then(parse_rfc3339),
            message: text(&l.message),
            background_tasks: l.background_tasks.unwrap_or(0),
            reason: l.reason.as_deref().map(str::to_owned),
            branch: l.branch.as_deref().map(str::to_owned),
        })
    }

    fn is_old(&self, now: i64) -> bool {
        is_old(self.at, now)
    }
}

/// Whether a row last written at `at` is idle longer than [`OLD_MS`] at `now`.
fn is_old(at: Option<i64>, now: i64) -> bool {
    at.is_some_and(|at| now - at > OLD_MS)
}

/// One line of the daemon's `status` answer as the client reads it, without building a
/// JSON tree (at 100,000 rows that tree is most of the client's time): a row (`session`
/// set), the end line (`end`), or the daemon's refusal (`error`). Fields the table does
/// not use are skipped.
#[derive(Debug, Default, serde::Deserialize)]
pub struct StatusLine<'a> {
    #[serde(default)]
    pub end: bool,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub error: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub session: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub provider: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub agent: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub project: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub project_long: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub branch: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub state: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub since: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub message: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub reason: Option<Cow<'a, str>>,
    #[serde(default)]
    pub background_tasks: Option<u64>,
}

impl StatusLine<'_> {
    /// A row's place in the table, without building the row ([`Fit::push_with`]);
    /// `None` for a line that is no session row.
    pub fn head(&self) -> Option<Head<'_>> {
        Some(Head {
            provider: self.provider.as_deref().and_then(ProviderKind::parse),
            session: self.session.as_deref()?,
            subagent: self.agent.is_some(),
            rank: rank(self.state.as_deref().unwrap_or_default()),
            at: self.since.as_deref().and_then(parse_rfc3339),
        })
    }
}

/// A text field of a status line, lent from the line where it has no escapes. serde
/// lends a `Cow<str>` only as a field of its own: inside an `Option` it always made an
/// owned copy, an allocation for every field of every row of a `status` table on top of
/// the row's own.
fn lent<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Cow<'de, str>>, D::Error> {
    #[derive(serde::Deserialize)]
    struct Lent<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(<Option<Lent<'de>> as serde::Deserialize>::deserialize(d)?.map(|l| l.0))
}

/// A line of a `status` answer as `status --json` reads it when it keeps every row:
/// only whether it is the end line, the daemon's refusal or a frame's head (the number
/// of bytes of rows after it). The rest of the line is checked as JSON and skipped, not
/// kept.
#[derive(Debug, Default, serde::Deserialize)]
pub struct StatusMark<'a> {
    #[serde(default)]
    pub end: bool,
    #[serde(borrow, default, deserialize_with = "lent")]
    pub error: Option<Cow<'a, str>>,
    #[serde(default)]
    pub frame: Option<u64>,
}

/// What to show (`--state`, `--project`, `--agent`, `--all`). The default shows every
/// session active within [`OLD_MS`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Empty: every state.
    pub states: Vec<String>,
    /// Matches `project` or `project_long`, ignoring case.
    pub project: Option<String>,
    pub agent: Option<ProviderKind>,
    /// Only sessions on this git branch (exact).
    pub branch: Option<String>,
    /// Also the sessions idle longer than [`OLD_MS`].
    pub all: bool,
}

impl Filter {
    /// Whether every row passes [`Filter::matches`] (no state, branch, project or agent
    /// filter): `--json` then need not read the rows, only pass them on.
    pub fn keeps_every_row(&self) -> bool {
        self.states.is_empty()
            && self.branch.is_none()
            && self.project.is_none()
            && self.agent.is_none()
    }

    /// Whether `r` passes the state, project and agent filters (not the age cut): this
    /// is also what filters `--json` rows.
    pub fn matches(&self, r: &Row) -> bool {
        (self.states.is_empty() || self.states.contains(&r.state))
            && self
                .branch
                .as_deref()
                .is_none_or(|b| r.branch.as_deref() == Some(b))
            && self.project.as_deref().is_none_or(|p| {
                r.project.to_lowercase() == p.to_lowercase()
                    || r.project_long.to_lowercase() == p.to_lowercase()
            })
            && self.agent.is_none_or(|a| r.provider == Some(a))
    }
}

/// `--state`: one of [`STATES`] (`needs-input` is taken for `needs_input`).
pub fn parse_state(s: &str) -> Result<String, String> {
    let s = s.trim().to_lowercase().replace('-', "_");
    if STATES.contains(&s.as_str()) {
        Ok(s)
    } else {
        Err(format!("unknown state `{s}` (use {})", STATES.join(", ")))
    }
}

/// `--agent`: a provider id (`claude`) or display name (`Claude Code`), in any case.
pub fn parse_agent(s: &str) -> Result<ProviderKind, String> {
    let plain = |s: &str| {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    let want = plain(s);
    let kinds = || crate::provider::ALL.iter().map(|a| a.kind());
    kinds()
        .find(|p| plain(p.as_str()) == want || plain(crate::naming::agent_name(Some(*p))) == want)
        .ok_or_else(|| {
            let names: Vec<String> = kinds()
                .map(|p| format!("{} ({})", p.as_str(), crate::naming::agent_name(Some(p))))
                .collect();
            format!("unknown agent `{s}` (use {})", names.join(", "))
        })
}

/// A watch root named on the command line or in the config that does not exist (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub provider: Option<String>,
    /// The path, with the home directory shown as `~`.
    pub path: String,
}

impl Waiting {
    /// The `waiting` list of a `status` end line.
    pub fn from_end(end: &Value, home: Option<&str>) -> Vec<Waiting> {
        let Some(list) = end["waiting"].as_array() else {
            return Vec::new();
        };
        list.iter()
            .filter_map(|w| {
                let path = w["path"].as_str()?;
                let path = match home.map(|h| h.trim_end_matches('/')) {
                    Some(h) if !h.is_empty() && path.starts_with(&format!("{h}/")) => {
                        format!("~{}", &path[h.len()..])
                    }
                    _ => path.to_owned(),
                };
                Some(Waiting {
                    provider: w["provider"].as_str().map(str::to_owned),
                    path,
                })
            })
            .collect()
    }
}

/// One row of the table: a session, the name its project shows as, and the subagents
/// folded into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub row: Row,
    pub project: String,
    pub subagents: Vec<Row>,
}

impl Shown {
    /// `row` as a row of the table with no subagents under it (yet), named by its own
    /// project until [`name_projects`] names the rows shown.
    fn alone(row: Row) -> Shown {
        Shown {
            project: row.project.clone(),
            row,
            subagents: Vec::new(),
        }
    }
}

/// What a table shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    pub shown: Vec<Shown>,
    /// Sessions left out for being idle longer than [`OLD_MS`] (they pass the filter).
    pub older: usize,
    /// Rows left out because the table has no room for them ([`Fit`]'s limit).
    pub more: usize,
    pub waiting: Vec<Waiting>,
}

/// Filters `rows`, folds each subagent into its parent's row (one whose parent is not in
/// view stays a row of its own), names a project by two components where two rows in
/// view share its name but not its directory, leaves out (and counts) sessions idle
/// longer than [`OLD_MS`] unless `filter.all`, and sorts ([`order`]).
pub fn view(rows: Vec<Row>, filter: &Filter, now: i64) -> View {
    let (mut shown, older) = gather(rows, filter, now);
    name_projects(&mut shown);
    order(&mut shown);
    View {
        shown,
        older,
        more: 0,
        waiting: Vec::new(),
    }
}

/// [`view`]'s rows before they are named and sorted, and how many were cut for age. A
/// session alone (no subagent rows), most of a large table, needs neither of the maps
/// that pair subagents with their sessions.
pub(super) fn gather(mut rows: Vec<Row>, filter: &Filter, now: i64) -> (Vec<Shown>, usize) {
    if rows.len() == 1
        && let Some(row) = rows.pop()
    {
        if !filter.matches(&row) {
            return (Vec::new(), 0);
        }
        if !filter.all && row.is_old(now) {
            return (Vec::new(), 1);
        }
        return (vec![Shown::alone(row)], 0);
    }
    inherit_projects(&mut rows);
    let (mains, subs): (Vec<Row>, Vec<Row>) = rows
        .into_iter()
        .filter(|r| filter.matches(r))
        .partition(|r| r.subagent.is_none());
    let mut shown: Vec<Shown> = mains.into_iter().map(Shown::alone).collect();
    let parents: HashMap<(Option<ProviderKind>, String), usize> = shown
        .iter()
        .enumerate()
        .map(|(i, s)| ((s.row.provider, s.row.session.clone()), i))
        .collect();
    let mut orphans = Vec::new();
    for sub in subs {
        match parents.get(&(sub.provider, sub.session.clone())) {
            Some(&i) => shown[i].subagents.push(sub),
            None => orphans.push(Shown::alone(sub)),
        }
    }
    shown.extend(orphans);
    let before = shown.len();
    if !filter.all {
        shown.retain(|s| !s.row.is_old(now));
    }
    let older = before - shown.len();
    (shown, older)
}

/// Which of `rows` pass `filter` (not the age cut), in order: what filters `--json`.
/// Subagents are judged by their parent's project, as in the table.
pub fn matching(rows: &[Row], filter: &Filter) -> Vec<bool> {
    let mut rows = rows.to_vec();
    inherit_projects(&mut rows);
    rows.iter().map(|r| filter.matches(r)).collect()
}

/// A subagent's records often name no directory: it takes its parent's project.
fn inherit_projects(rows: &mut [Row]) {
    let parents: HashMap<(Option<ProviderKind>, String), (String, String)> = rows
        .iter()
        .filter(|r| r.subagent.is_none())
        .map(|r| {
            (
                (r.provider, r.session.clone()),
                (r.project.clone(), r.project_long.clone()),
            )
        })
        .collect();
    for r in rows.iter_mut().filter(|r| r.subagent.is_some()) {
        if let Some((p, l)) = parents.get(&(r.provider, r.session.clone())) {
            r.project.clone_from(p);
            r.project_long.clone_from(l);
        }
    }
}

/// Two rows named `my-web-app` from two directories show as `src/my-web-app` and
/// `forks/my-web-app`; two sessions in one directory stay `my-web-app`.
fn name_projects(shown: &mut [Shown]) {
    let mut longs: HashMap<&str, HashSet<&str>> = HashMap::new();
    for s in shown.iter() {
        longs
            .entry(&s.row.project)
            .or_default()
            .insert(&s.row.project_long);
    }
    let twice: HashSet<String> = longs
        .into_iter()
        .filter(|(_, l)| l.len() > 1)
        .map(|(p, _)| p.to_owned())
        .collect();
    for s in shown.iter_mut() {
        s.project = if twice.contains(&s.row.project) {
            s.row.project_long.clone()
        } else {
            s.row.project.clone()
        };
    }
}

/// Where a state sorts: [`STATES`] order, anything else after.
pub fn rank(state: &str) -> usize {
    STATES
        .iter()
        .position(|s| *s == state)
        .unwrap_or(STATES.len())
}

/// The person's order: by state ([`STATES`]), then newest first (rows with no time
/// last), then by project and session so that equal rows keep one order.
pub fn order(shown: &mut [Shown]) {
    shown.sort_by(urgency);
}

/// [`order`]'s comparison: a total order, as no two rows share a session and subagent.
pub(super) fn urgency(a: &Shown, b: &Shown) -> std::cmp::Ordering {
    let (a, b) = (&a.row, &b.row);
    rank(&a.state)
        .cmp(&rank(&b.state))
        .then_with(|| b.at.cmp(&a.at))
        .then_with(|| a.project.cmp(&b.project))
        .then_with(|| a.session.cmp(&b.session))
        .then_with(|| a.subagent.cmp(&b.subagent))
}
