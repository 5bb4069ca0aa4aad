//! `baton status --watch`: a full-screen table fed by the daemon's stream.
//!
//! A feeder thread asks the daemon for `status` at each (re)connection and then follows
//! its events ([`follow`]); the terminal loop owns the [`state::View`], applies what the
//! feeder sends, handles keys and draws ([`render`]). The terminal is put back on exit,
//! on error and on panic.

pub mod bar;
pub mod follow;
pub mod render;
pub mod state;

use crate::error::Error;
use crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind, KeyModifiers};
use serde_json::Value;
use state::{Input, Link, View};
use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the loop waits for a key before looking at the feed again: an event is on
/// screen within this (plus a draw).
const TICK: Duration = Duration::from_millis(25);
/// Ages on screen are redrawn this often even when nothing happens.
const REDRAW: Duration = Duration::from_secs(1);

/// What the feeder thread tells the terminal loop (and the status bar's, [`bar`]).
pub(crate) enum Feed {
    /// The `status` rows and its end line.
    Status(Vec<Value>, Value),
    Event(Value),
    Down(String),
}

/// Runs until the person quits.
pub fn watch(socket: Option<PathBuf>) -> Result<(), Error> {
    if !io::stdout().is_terminal() {
        return Err(Error::Usage(
            "`status --watch` needs a terminal; use `baton tail --json --follow` in a pipe".into(),
        ));
    }
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("baton-feed".to_owned())
        .spawn(move || feed(socket, &tx))
        .map_err(|e| Error::Output(io::Error::other(format!("cannot start a thread: {e}"))))?;
    // Installs a panic hook that restores the terminal first. A set-up that failed half
    // way (raw mode on, no alternate screen) is undone too.
    let mut term = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            ratatui::restore();
            return Err(Error::Output(e));
        }
    };
    let result = run(&mut term, &rx);
    ratatui::restore();
    result
}

fn run(term: &mut ratatui::DefaultTerminal, rx: &mpsc::Receiver<Feed>) -> Result<(), Error> {
    let mut view = View::default();
    let mut dirty = true;
    let mut drawn = Instant::now();
    loop {
        if dirty || drawn.elapsed() >= REDRAW {
            let now = crate::clock::wall_now();
            term.draw(|f| render::draw(f, &view, now))
                .map_err(Error::Output)?;
            drawn = Instant::now();
            dirty = false;
        }
        if event::poll(TICK).map_err(Error::Output)? {
            match event::read().map_err(Error::Output)? {
                TermEvent::Key(k) if k.kind != KeyEventKind::Release => {
                    if let Some(input) = input(k.code, k.modifiers) {
                        if view.key(input) {
                            return Ok(());
                        }
                        dirty = true;
                    }
                }
                TermEvent::Resize(..) => dirty = true,
                _ => {}
            }
        }
        loop {
            match rx.try_recv() {
                Ok(Feed::Status(rows, end)) => {
                    view.set_status(&rows);
                    view.set_remotes(&end);
                    view.link = Link::Live;
                    dirty = true;
                }
                Ok(Feed::Event(ev)) => dirty |= view.apply(&ev),
                Ok(Feed::Down(why)) => {
                    view.link = Link::Down(why);
                    dirty = true;
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    return Err(Error::Output(io::Error::other("the feed thread stopped")));
                }
            }
        }
    }
}

fn input(code: KeyCode, mods: KeyModifiers) -> Option<Input> {
    Some(match code {
        KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => Input::CtrlC,
        KeyCode::Char(c) => Input::Char(c),
        KeyCode::Enter => Input::Enter,
        KeyCode::Esc => Input::Esc,
        KeyCode::Backspace => Input::Backspace,
        _ => return None,
    })
}

/// Follows the daemon for the terminal loop until that loop is gone: subscribes first,
/// then asks for `status`, so no event falls between the two (one that the answer already
/// holds is applied again, to the same state).
pub(crate) fn feed(socket: Option<PathBuf>, tx: &mpsc::Sender<Feed>) {
    let mut f = follow::Follower::new(socket, None, None);
    loop {
        let why = match f.connect() {
            Ok(reader) => match follow::status_rows(f.socket()) {
                Ok((rows, end)) => {
                    if tx.send(Feed::Status(rows, end)).is_err() {
                        return;
                    }
                    let end = f.pump(reader, |line| {
                        if let follow::Line::Event(_, v) = line {
                            tx.send(Feed::Event(v.clone()))
                                .map_err(|_| Error::Output(io::ErrorKind::BrokenPipe.into()))?;
                        }
                        Ok(())
                    });
                    match end {
                        Ok(follow::End::Closed) => "the daemon stopped".to_owned(),
                        Ok(follow::End::Dropped(n) | follow::End::Refused(n)) => n,
                        Err(Error::Output(_)) => return,
                        Err(e) => e.to_string(),
                    }
                }
                Err(e) => e.to_string(),
            },
            Err(e) => e.to_string(),
        };
        if tx.send(Feed::Down(why)).is_err() {
            return;
        }
        std::thread::sleep(f.next_backoff());
    }
}
