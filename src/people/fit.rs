//! The `status` table at any number of sessions: the daemon's rows are taken one at a
//! time and only the rows the table will show are kept, so the client's memory follows
//! the table, not the daemon's sessions (100,000 of them is a year of heavy use).
//!
//! The daemon sends its rows in key order (agent, session, subagent), so a session's row
//! comes just before its subagents': one session is gathered, run through the same
//! filter and age cut as a whole table ([`gather`]), and its rows join the kept ones.
//! Past twice the limit the kept rows are cut back to the limit, the most urgent kept,
//! so the table is the `limit` most urgent rows (what waits for the person, then the
//! newest) of all of them.
//!
//! Once a cut has filled the table, a session less urgent than every row it kept can
//! never be shown: [`Fit::push_with`] counts it from its [`Head`] without building its
//! rows (at 100,000 sessions, building them was about a third of the client's time).

use super::{Filter, Row, Shown, View, gather, name_projects, order, urgency};
use crate::model::ProviderKind;
use std::cmp::Reverse;

/// What places a row in the table's order, read from its line before the row is built.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    pub provider: Option<ProviderKind>,
    pub session: &'a str,
    pub subagent: bool,
    /// Its state's place ([`super::rank`]).
    pub rank: usize,
    /// Unix ms of its last record.
    pub at: Option<i64>,
}

/// A row's place in the order, state first, then newest first (no time last): a larger
/// key is less urgent.
type Place = (usize, Reverse<Option<i64>>);

/// Rows of the table being gathered.
#[derive(Debug)]
pub struct Fit {
    filter: Filter,
    now: i64,
    /// At most this many rows in the table; `None`: every row.
    limit: Option<usize>,
    /// The rows of the session being gathered (its own, then its subagents').
    session: Vec<Row>,
    kept: Vec<Shown>,
    older: usize,
    /// Rows that passed the filter and the age cut but did not fit.
    more: usize,
    /// Rows taken in, shown or not.
    rows: usize,
    /// The least urgent place kept at the last cut: a session placed after it can no
    /// longer be shown.
    bar: Option<Place>,
    /// The session whose row was counted unbuilt: its subagents' rows go with it.
    skipping: Option<(Option<ProviderKind>, String)>,
}

impl Fit {
    /// A table of at most `limit` rows (at least one), filtered by `filter` as of `now`.
    pub fn new(filter: &Filter, now: i64, limit: Option<usize>) -> Fit {
        Fit {
            filter: filter.clone(),
            now,
            limit: limit.map(|n| n.max(1)),
            session: Vec::new(),
            kept: Vec::new(),
            older: 0,
            more: 0,
            rows: 0,
            bar: None,
            skipping: None,
        }
    }

    /// Takes the next row of the daemon's answer, placed by `head`: built by `row` only
    /// if it may still be shown. A session placed after every row the table kept at its
    /// last cut is counted (`more`, or `older` past the age cut) and its subagents' rows
    /// that follow it are folded into it unbuilt, as [`Fit::push`] would have cut them.
    /// Only without a filter: a filtered-out row is not counted at all, and the filter
    /// needs the whole row.
    pub fn push_with(&mut self, head: Head<'_>, row: impl FnOnce() -> Option<Row>) {
        if self.filter.keeps_every_row() {
            if head.subagent {
                if self
                    .skipping
                    .as_ref()
                    .is_some_and(|(p, s)| *p == head.provider && s == head.session)
                {
                    self.rows += 1;
                    return;
                }
            } else {
                self.skipping = None;
                if self
                    .bar
                    .is_some_and(|bar| (head.rank, Reverse(head.at)) > bar)
                {
                    self.rows += 1;
                    // A new session: the one gathered before it is done.
                    self.end_session();
                    if !self.filter.all && super::is_old(head.at, self.now) {
                        self.older += 1;
                    } else {
                        self.more += 1;
                    }
                    self.skipping = Some((head.provider, head.session.to_owned()));
                    return;
                }
            }
        }
        if let Some(r) = row() {
            self.push(r);
        }
    }

    /// Takes the next row of the daemon's answer.
    pub fn push(&mut self, row: Row) {
        self.rows += 1;
        if self
            .session
            .first()
            .is_some_and(|f| f.provider != row.provider || f.session != row.session)
        {
            self.end_session();
        }
        self.session.push(row);
    }

    /// How many rows were taken in.
    pub fn rows(&self) -> usize {
        self.rows
    }

    fn end_session(&mut self) {
        let rows = std::mem::take(&mut self.session);
        // Named and sorted once, among the kept rows ([`Fit::cut`], [`Fit::finish`]),
        // not once per session as well.
        let (shown, older) = gather(rows, &self.filter, self.now);
        self.older += older;
        self.kept.extend(shown);
        if let Some(n) = self.limit
            && self.kept.len() >= 2 * n
        {
            self.cut(n);
        }
    }

    /// Keeps the `n` most urgent rows. Picked, not sorted: a cut comes every `n` rows, and
    /// [`Fit::finish`] sorts the ones left once.
    fn cut(&mut self, n: usize) {
        if self.kept.len() <= n {
            return;
        }
        self.kept.select_nth_unstable_by(n, urgency);
        self.more += self.kept.len() - n;
        self.kept.truncate(n);
        self.bar = self
            .kept
            .iter()
            .map(|s| (super::rank(&s.row.state), Reverse(s.row.at)))
            .max();
    }

    /// The table: the kept rows named ([`name_projects`]: among the rows shown) and
    /// sorted, with how many were left out for age (`older`) and for room (`more`).
    pub fn finish(mut self) -> View {
        self.end_session();
        if let Some(n) = self.limit {
            self.cut(n);
        }
        let mut shown = self.kept;
        name_projects(&mut shown);
        order(&mut shown);
        View {
            shown,
            older: self.older,
            more: self.more,
            waiting: Vec::new(),
        }
    }
}

/// `status --json`'s filter, one row at a time: [`super::matching`] for rows in key
/// order, where a subagent is judged by its session's project (its session's row came
/// just before it).
#[derive(Debug)]
pub struct Matching {
    filter: Filter,
    /// The last session row: its agent, id, project and long project name.
    parent: Option<(Option<ProviderKind>, String, String, String)>,
}

impl Matching {
    pub fn new(filter: &Filter) -> Matching {
        Matching {
            filter: filter.clone(),
            parent: None,
        }
    }

    /// Whether `row`, the next row of the answer, passes the filter.
    pub fn matches(&mut self, mut row: Row) -> bool {
        if row.subagent.is_none() {
            self.parent = Some((
                row.provider,
                row.session.clone(),
                row.project.clone(),
                row.project_long.clone(),
            ));
        } else if let Some((provider, session, project, long)) = &self.parent
            && *provider == row.provider
            && *session == row.session
        {
            row.project.clone_from(project);
            row.project_long.clone_from(long);
        }
        self.filter.matches(&row)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::people::view;

    fn row(session: &str, sub: Option<&str>, state: &str, at: i64, project: &str) -> Row {
        Row {
            state: state.to_owned(),
            provider: Some(ProviderKind::Claude),
            session: session.to_owned(),
            subagent: sub.map(str::to_owned),
            project: project.to_owned(),
            project_long: format!("src/{project}"),
            at: Some(at),
            message: String::new(),
            background_tasks: 0,
            reason: None,
            branch: None,
        }
    }

    /// A few sessions with subagents, some old, in key order.
    fn rows() -> Vec<Row> {
        let now = 100 * 86_400_000;
        let mut rows = Vec::new();
        for i in 0..40 {
            let state = super::super::STATES[i % 6];
            let at = now - (i as i64) * 3_600_000 * 7;
            let s = format!("s{i:02}");
            rows.push(row(&s, None, state, at, &format!("p{}", i % 5)));
            if i % 3 == 0 {
                rows.push(row(&s, Some("a"), "working", at, ""));
                rows.push(row(&s, Some("b"), "needs_input", at, ""));
            }
        }
        rows
    }

    fn fit(filter: &Filter, limit: Option<usize>) -> View {
        let mut f = Fit::new(filter, 100 * 86_400_000, limit);
        for r in rows() {
            f.push(r);
        }
        f.finish()
    }

    #[test]
    fn a_status_line_reads_as_the_parsed_line_does() {
        let mut v = crate::views::test_view("s1", Some("a1"), crate::model::SessionState::Failed);
        v.start_dir = Some("/home/me/src/web".to_owned());
        v.record_ts = Some(5_000);
        v.message = Some("line \"one\"\nand two".into());
        v.branch = Some("feat/x".to_owned());
        v.background_tasks = 2;
        v.reason = Some("writer_gone");
        let line =
            crate::session_row::json_line(&v, 10_000, 60_000, crate::session_row::Command::Status);
        let typed: super::super::StatusLine<'_> = serde_json::from_str(&line).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        let row = Row::from_status_line(&typed);
        assert!(row.is_some());
        assert_eq!(row, Row::from_status(&parsed));
        let end: super::super::StatusLine<'_> =
            serde_json::from_str(r#"{"end":true,"sessions":3,"mutes":[{"target":"x"}]}"#).unwrap();
        assert!(end.end && Row::from_status_line(&end).is_none());
        // Nulls and missing fields read as the parsed line has them.
        let sparse = r#"{"provider":"claude","session":"s2","agent":null,"message":null}"#;
        let typed: super::super::StatusLine<'_> = serde_json::from_str(sparse).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(sparse).unwrap();
        assert_eq!(typed.agent, None);
        assert_eq!(Row::from_status_line(&typed), Row::from_status(&parsed));
        // The daemon's refusal, escapes and all, for `--json`'s quick read.
        let mark: super::super::StatusMark<'_> =
            serde_json::from_str(r#"{"error":"no \"such\" thing\u00e9"}"#).unwrap();
        assert_eq!(mark.error.as_deref(), Some("no \"such\" thing\u{e9}"));
        assert!(!mark.end);
    }

    /// The default table, `--all`, and two filters.
    fn filters() -> [Filter; 4] {
        [
            Filter::default(),
            Filter {
                all: true,
                ..Filter::default()
            },
            Filter {
                states: vec!["working".to_owned(), "failed".to_owned()],
                ..Filter::default()
            },
            Filter {
                project: Some("p1".to_owned()),
                ..Filter::default()
            },
        ]
    }

    /// Many sessions in key order, in every state, some old, some with no time, some
    /// with subagents, in a scattered order of urgency.
    fn many() -> Vec<Row> {
        let now = 100 * 86_400_000;
        let mut rows = Vec::new();
        for i in 0..600_i64 {
            let mix = (i * 7919) % 601;
            let state = super::super::STATES[usize::try_from(mix % 7).unwrap() % 6];
            let at = now - mix * 3_600_000 / 2;
            let s = format!("s{i:04}");
            let mut r = row(&s, None, state, at, &format!("p{}", mix % 9));
            if mix % 13 == 0 {
                r.at = None;
            }
            rows.push(r);
            for (k, sub) in ["a", "b"]
                .iter()
                .enumerate()
                .take(usize::try_from(mix % 3).unwrap())
            {
                let sub_state = super::super::STATES[k * 3];
                rows.push(row(&s, Some(sub), sub_state, at, ""));
            }
        }
        rows
    }

    /// Counting a session from its place without building its rows gives the table the
    /// rows built one by one give, and builds few of them.
    #[test]
    fn rows_placed_past_the_kept_ones_are_counted_unbuilt() {
        let now = 100 * 86_400_000;
        for filter in filters() {
            for n in [1, 5, 40] {
                let mut plain = Fit::new(&filter, now, Some(n));
                let mut lazy = Fit::new(&filter, now, Some(n));
                let mut built = 0;
                for r in many() {
                    plain.push(r.clone());
                    let head = Head {
                        provider: r.provider,
                        session: &r.session,
                        subagent: r.subagent.is_some(),
                        rank: super::super::rank(&r.state),
                        at: r.at,
                    };
                    lazy.push_with(head, || {
                        built += 1;
                        Some(r.clone())
                    });
                }
                assert_eq!(lazy.rows(), plain.rows());
                let (plain, lazy) = (plain.finish(), lazy.finish());
                assert_eq!(lazy, plain, "{filter:?}, {n} rows");
                if filter.keeps_every_row() {
                    assert_eq!(plain.shown.len(), n);
                    assert!(built < many().len() / 2, "{built} rows built, {n} shown");
                } else {
                    assert_eq!(built, many().len(), "a filter needs every row");
                }
            }
        }
    }

    #[test]
    fn the_streamed_json_filter_is_the_whole_answers() {
        for project in ["p1", "src/p2", "nothing"] {
            let filter = Filter {
                project: Some(project.to_owned()),
                ..Filter::default()
            };
            let mut m = Matching::new(&filter);
            let streamed: Vec<bool> = rows().into_iter().map(|r| m.matches(r)).collect();
            assert_eq!(
                streamed,
                super::super::matching(&rows(), &filter),
                "{project}"
            );
        }
    }

    #[test]
    fn without_a_limit_it_is_the_whole_table() {
        let now = 100 * 86_400_000;
        for filter in filters() {
            assert_eq!(fit(&filter, None), view(rows(), &filter, now), "{filter:?}");
        }
    }

    #[test]
    fn with_a_limit_it_keeps_the_most_urgent_rows_and_counts_the_rest() {
        let now = 100 * 86_400_000;
        let filter = Filter::default();
        let whole = view(rows(), &filter, now);
        for n in [1, 3, 7, 10] {
            let got = fit(&filter, Some(n));
            assert_eq!(got.shown.len(), n);
            assert_eq!(got.more, whole.shown.len() - n);
            assert_eq!(got.older, whole.older);
            let first: Vec<_> = whole.shown[..n].iter().map(|s| &s.row).collect();
            let kept: Vec<_> = got.shown.iter().map(|s| &s.row).collect();
            assert_eq!(kept, first, "limit {n}");
            // Subagents stay folded into their session's row.
            assert_eq!(
                got.shown.iter().map(|s| s.subagents.len()).sum::<usize>(),
                whole.shown[..n]
                    .iter()
                    .map(|s| s.subagents.len())
                    .sum::<usize>()
            );
        }
    }
}
