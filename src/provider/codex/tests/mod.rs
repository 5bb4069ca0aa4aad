//! The fast path for plain records ([`super::plain`]) against the full parse: on every
//! real Codex rollout, on those lines written the ways the byte layout does not expect
//! (spaces, other key order, escapes), on lines changed so that they do decide
//! something, and on broken lines, both must give the same observations and leave the
//! projector in the same state.
//!
//! This file holds the routes a line is projected by and the comparison every test
//! makes; the tests are split by what they feed it, so each stays readable alone: real
//! lines and lines changed from them ([`corpus`]), one field at a time ([`fields`]),
//! and records read in the light of those before them ([`sequences`]).

#![allow(clippy::unwrap_used)]

mod corpus;
mod fields;
mod sequences;

use super::CodexProjector;
use super::plain::looks_plain;
use crate::provider::{Obs, Projector};
use std::path::Path;

const PATH: &str = "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl";

/// How a line is projected in these tests.
#[derive(Clone, Copy, Debug)]
enum Route {
    /// As in production: the fast path for lines with Codex's own layout.
    Fast,
    /// The fast path tried on every line, whatever its layout.
    Scan,
    /// The full parse alone.
    Full,
}

/// One line through a projector restored from `state`. Gives the observations, the
/// error, and the state after.
fn run(state: &str, line: &[u8], route: Route) -> (Vec<Obs>, Result<(), String>, String) {
    let mut p = CodexProjector::new(Path::new(PATH));
    assert!(p.restore(state));
    let mut out = Vec::new();
    let gate: Option<fn(&[u8]) -> bool> = match route {
        Route::Fast => Some(looks_plain),
        Route::Scan => Some(|_| true),
        Route::Full => None,
    };
    let res = p.project_with(line, &mut out, gate).map_err(|e| e.0);
    (out, res, p.save())
}

/// Asserts that `line` projects the same all ways from `state`.
fn same(state: &str, line: &[u8]) {
    let full = run(state, line, Route::Full);
    for route in [Route::Fast, Route::Scan] {
        assert_eq!(
            run(state, line, route),
            full,
            "{route:?} and the full parse differ on\n{}",
            String::from_utf8_lossy(line)
        );
    }
}
