//! The tail-first read's backward search, line by line from the end of a file: which
//! line the read restarts at, which lines it may jump over, and what it must show the
//! restarted projector first. Its bytes come from [`super::restart_point`].

use crate::model::ProviderKind;
use crate::provider::restart::{self, Restart};
use std::path::Path;

/// Where a read restarts: at `offset`, then (with `jump`) from the line after it
/// straight to `jump`. `turn` is the turn whose copy before `offset` would make the
/// restart unsafe; `context` the last line the jump skips that sets the projector's
/// context ([`restart::sets_context`]).
pub(super) struct Found {
    pub(super) offset: u64,
    pub(super) turn: String,
    pub(super) jump: Option<u64>,
    pub(super) context: Option<Vec<u8>>,
    /// A line read needs the projector's context and nothing read sets it: the part
    /// before `offset` is searched for [`restart::context_hazard`] too.
    pub(super) uncovered: bool,
}

/// The backward search, line by line from the end: first for the last turn start, then,
/// if the read cannot start there, for the start of the turn before it (or a line after
/// that start that settles the state). From either start the read may jump to a later
/// line of the same turn that decides the message and pending answer anew.
pub(super) struct Search<'p> {
    kind: ProviderKind,
    path: &'p Path,
    /// The last turn start, once passed (the search then looks for the turn before):
    /// its line start and turn.
    last: Option<(u64, String)>,
    /// The last line of the turn looked for now (before any turn start) that resets
    /// the session's message and pending answer: the read can jump there from the
    /// turn's start.
    jump: Option<u64>,
    /// Something between the turn's start and `jump` that a jump would miss.
    barrier: bool,
    /// Turns named between the turn's start and `jump`.
    named: Vec<String>,
    /// The last line between the turn's start and `jump` that sets the projector's
    /// context: a jump shows it to the projector.
    context: Option<Vec<u8>>,
    /// A line that needs the projector's context lies after the restart point with no
    /// line that sets it before it (the context it needs is in the part not read).
    uncovered: bool,
}

impl<'p> Search<'p> {
    /// A search of a file of `kind` at `path`, at its end.
    pub(super) fn new(kind: ProviderKind, path: &'p Path) -> Self {
        Search {
            kind,
            path,
            last: None,
            jump: None,
            barrier: false,
            named: Vec::new(),
            context: None,
            uncovered: false,
        }
    }

    /// One complete line (`None`: too long to look at). `Some` ends the search.
    pub(super) fn line(
        &mut self,
        line: Option<&[u8]>,
        start: u64,
    ) -> Option<Result<Found, &'static str>> {
        // Going backwards, a line that sets the context covers every line after it.
        // Whether a line sets the context is asked only where the answer counts: while
        // something read needs it, where a jump may skip the line (and no later line it
        // skips set it), or of a line that needs it.
        let needs = line.is_some_and(|l| restart::needs_context(self.kind, l));
        let asks = needs || self.uncovered || (self.jump.is_some() && self.context.is_none());
        let sets = asks && line.is_some_and(|l| restart::sets_context(self.kind, l));
        if sets {
            self.uncovered = false;
        } else if needs {
            self.uncovered = true;
        }
        let found = self.look(line, start, (sets, needs))?;
        Some(found.map(|f| Found {
            uncovered: self.uncovered,
            ..f
        }))
    }

    fn look(
        &mut self,
        line: Option<&[u8]>,
        start: u64,
        (sets_context, needs_context): (bool, bool),
    ) -> Option<Result<Found, &'static str>> {
        let Some(line) = line else {
            // Could be anything, a turn start or the projector's context included.
            self.barrier |= self.jump.is_some();
            return None;
        };
        let class = restart::classify(self.kind, self.path, line);
        if let Restart::Unsafe(reason) = class {
            return Some(Err(reason));
        }
        if let Some((_, last)) = &self.last {
            match &class {
                Restart::At(turn) if last == turn => return Some(Err("repeated_turn")),
                Restart::At(_) => {}
                _ if restart::settles(self.kind, self.path, line) => {
                    return Some(Ok(Found {
                        offset: start,
                        turn: last.clone(),
                        jump: None,
                        context: None,
                        uncovered: false,
                    }));
                }
                _ => {}
            }
        }
        match class {
            Restart::At(turn) => {
                if let Some(to) = self.jump
                    && !self.barrier
                    && self.named.iter().all(|n| *n == turn)
                {
                    return Some(Ok(Found {
                        offset: start,
                        turn,
                        jump: Some(to),
                        context: self.context.take(),
                        uncovered: false,
                    }));
                }
                if self.last.is_some() {
                    // The turn before the last, read from its start.
                    return Some(Ok(Found {
                        offset: start,
                        turn,
                        jump: None,
                        context: None,
                        uncovered: false,
                    }));
                }
                // The last turn start, with nothing to jump to: look on for the turn
                // before it (whose answer the last turn starts with), and a jump in it.
                self.last = Some((start, turn));
                self.jump = None;
                self.barrier = false;
                self.named.clear();
                self.context = None;
            }
            Restart::Maybe => self.barrier |= self.jump.is_some(),
            _ if self.jump.is_none() => {
                // A line whose meaning depends on context the fresh projector of
                // `resets` lacks may decide nothing where it has it (a Claude text
                // without a stop, in a file that stamps every block): no place to jump.
                if !needs_context && restart::resets(self.kind, self.path, line) {
                    self.jump = Some(start);
                }
            }
            _ => {
                self.named.extend(restart::names_turn(self.kind, line));
                // A turn decided in the middle makes the answer after it a turn of its
                // own (one outcome per turn): the jump would miss that.
                self.barrier |= restart::may_end_turn(self.kind, line);
                if self.context.is_none() && sets_context {
                    self.context = Some(line.to_vec());
                }
            }
        }
        None
    }
}
