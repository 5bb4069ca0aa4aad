//! The desktop sink's D-Bus side, on its own thread: `Notify` calls on one session-bus
//! connection, kept while it works, and a listener on that same connection for
//! `ActionInvoked` (servers such as dunst send the signal only to the connection that
//! made the notification). A click is acted on by [`crate::focus::click`] on the
//! listener's thread, never the core's. A server of the notification spec 1.2 sends
//! `ActivationToken(id, token)` just before `ActionInvoked`: the token (checked by
//! [`valid_token`]) goes with the click, for the programs it runs.

use super::focused::Check;
use super::kinds::{Style, Urgency};
use super::quiet::HeldLog;
use crate::diag::{self, DesktopCounters};
use crate::focus::{self, click};
use lru::LruCache;
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use zbus::Variant as Value;

/// How many sessions' cooldowns and notification ids are remembered (least recently
/// notified forgotten first), so memory stays bounded however many sessions come and go.
pub const SESSIONS_REMEMBERED: usize = 512;

/// One notification, ready to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The session it belongs to: notifications with the same key replace each other.
    pub key: String,
    /// The id of the event it shows, so a later `turn_resumed` can take it back.
    pub event: String,
    pub summary: String,
    /// Plain text with markup escaped.
    pub body: String,
    /// Its kind's look and sound.
    pub style: Style,
    /// The session, for a click and for focus.
    pub click: click::Session,
    /// The session's git branch, for `mute --branch`.
    pub branch: Option<String>,
}

/// What the D-Bus thread does.
// A few jobs per minute at most sit in a 16-slot queue: boxing the note saves nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    Show(Note),
    /// Close the session's notification if it still shows this event.
    Close {
        key: String,
        event: String,
    },
}

const DEST: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";
/// The `desktop-entry` hint: servers find baton's icon and name by it.
const DESKTOP_ENTRY: &str = "baton";
/// A freedesktop icon-theme name every theme has.
const ICON: &str = "utilities-terminal";
/// Notifications whose clicks are remembered (oldest forgotten first).
const CLICKS_REMEMBERED: usize = 512;
/// Activation tokens kept until their `ActionInvoked` comes (oldest forgotten first).
const TOKENS_REMEMBERED: usize = 64;
/// Longest activation token passed on. Real ones are short (GNOME Shell's and KWin's
/// are well under 100 bytes); a longer one is not a token.
pub const TOKEN_MAX: usize = 256;

/// Counts and state shared with the sink.
#[derive(Debug, Default)]
pub struct Shared {
    pub down: AtomicBool,
    pub counts: Arc<DesktopCounters>,
}

/// The server's activation token, if it is fit to pass on in an environment variable:
/// 1 to [`TOKEN_MAX`] bytes of printable ASCII with no space. It comes from another
/// program on the bus, so it is checked, and only ever set as an environment variable,
/// never put in a command line or a shell string.
pub fn valid_token(t: &str) -> Option<&str> {
    (!t.is_empty() && t.len() <= TOKEN_MAX && t.bytes().all(|b| b.is_ascii_graphic())).then_some(t)
}

/// What the worker needs besides jobs.
pub struct Setup {
    pub shared: Arc<Shared>,
    pub held: Arc<HeldLog>,
    pub suppress_when_focused: bool,
    pub on_click: Vec<String>,
    /// Where `status` reads whether a click can raise the terminal.
    pub raise: Arc<click::RaiseCheck>,
}

/// Looks again whether a click could raise the terminal ([`click::why_no_raise`]), for
/// `status`: only where clicks exist (a server with actions), and at each notification
/// shown, since the screen can come and go (a service started before the session).
fn check_raise(setup: &Setup, actions: bool) {
    let why = if actions {
        click::why_no_raise(&focus::Screen::detect(), &setup.on_click)
    } else {
        None
    };
    setup.raise.set(why);
}

type Clicks = Arc<Mutex<LruCache<u32, click::Session>>>;

/// The worker's state: the connection (while it works) and what each shown
/// notification goes back to.
struct Bus {
    conn: Option<(zbus::Connection, bool)>,
    ids: LruCache<String, (u32, String)>,
    clicks: Clicks,
}

fn cap(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN)
}

/// Runs the jobs until the queue disconnects.
pub fn work(jobs: crossbeam_channel::Receiver<Job>, setup: &Setup) {
    let mut bus = Bus {
        conn: None,
        ids: LruCache::new(cap(SESSIONS_REMEMBERED)),
        clicks: Arc::new(Mutex::new(LruCache::new(cap(CLICKS_REMEMBERED)))),
    };
    for job in jobs {
        match job {
            Job::Show(note) => {
                if setup.suppress_when_focused
                    && Check::of_click(&note.click, &note.event)
                        .is_some_and(|c| c.holds("desktop", &setup.held))
                {
                    diag::DesktopFocused.emit(&setup.shared.counts);
                    continue;
                }
                bus.show(&note, setup);
            }
            Job::Close { key, event } => {
                if bus.ids.peek(&key).is_some_and(|(_, e)| *e == event)
                    && let Some((id, _)) = bus.ids.pop(&key)
                    && let Some((conn, _)) = &bus.conn
                    && let Err(e) = zbus::block_on(conn.call_method(
                        Some(DEST),
                        PATH,
                        Some(DEST),
                        "CloseNotification",
                        &(id,),
                    ))
                {
                    tracing::debug!(error = %e, id, "Closing a desktop notification failed.");
                }
            }
        }
    }
}

/// The agent a notification is about, if it runs on this machine (for focus and clicks).
fn local_agent(s: &click::Session) -> Option<focus::LocalAgent> {
    focus::local_agent(
        crate::model::ProviderKind::parse(&s.provider),
        std::path::Path::new(&s.path),
        s.remote.is_some(),
    )
}

impl Bus {
    /// The connection, made (with its click listener) if there is none.
    fn connect(&mut self, setup: &Setup) -> zbus::Result<(zbus::Connection, bool)> {
        if let Some(c) = &self.conn {
            return Ok(c.clone());
        }
        let conn = zbus::block_on(zbus::Connection::session())?;
        let caps: Vec<String> = zbus::block_on(async {
            conn.call_method(Some(DEST), PATH, Some(DEST), "GetCapabilities", &())
                .await?
                .body()
                .deserialize::<Vec<String>>()
        })?;
        let actions = caps.iter().any(|c| c == "actions");
        if actions {
            listen(&conn, Arc::clone(&self.clicks), setup);
        }
        self.conn = Some((conn.clone(), actions));
        Ok((conn, actions))
    }

    fn show(&mut self, note: &Note, setup: &Setup) {
        let shared = &setup.shared;
        let result = self.connect(setup).and_then(|(conn, actions)| {
            notify(
                &conn,
                note,
                self.ids.get(&note.key).map(|(id, _)| *id),
                actions,
            )
        });
        match result {
            Ok(id) => {
                check_raise(setup, self.conn.as_ref().is_some_and(|(_, a)| *a));
                self.ids.put(note.key.clone(), (id, note.event.clone()));
                self.clicks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .put(id, note.click.clone());
                diag::NotificationShown {
                    recovered: shared.down.swap(false, Ordering::AcqRel),
                }
                .emit(&shared.counts);
            }
            Err(e) => {
                self.conn = None;
                check_raise(setup, false);
                diag::NotificationFailed {
                    error: &e,
                    again: shared.down.swap(true, Ordering::AcqRel),
                }
                .emit(&shared.counts);
            }
        }
    }
}

/// One `Notify` call; returns the server's id.
fn notify(
    conn: &zbus::Connection,
    note: &Note,
    replaces: Option<u32>,
    actions: bool,
) -> zbus::Result<u32> {
    let st = &note.style;
    let mut hints: HashMap<&str, Value<'_>> = HashMap::new();
    hints.insert("urgency", Value::U8(st.urgency.level()));
    hints.insert("category", Value::from(st.category));
    hints.insert("desktop-entry", Value::from(DESKTOP_ENTRY));
    if let Some(f) = &st.sound_file {
        hints.insert("sound-file", Value::from(f.display().to_string()));
    } else if let Some(n) = &st.sound_name {
        hints.insert("sound-name", Value::from(n.as_str()));
    }
    if st.urgency == Urgency::Critical {
        // Kept in the server's history after a click, so it can still be acted on.
        hints.insert("resident", Value::Bool(true));
    }
    let acts: Vec<&str> = if actions {
        vec!["default", "Open", "open", "Open"]
    } else {
        Vec::new()
    };
    let timeout: i32 = st
        .timeout_ms
        .map_or(-1, |t| i32::try_from(t).unwrap_or(i32::MAX));
    zbus::block_on(async {
        conn.call_method(
            Some(DEST),
            PATH,
            Some(DEST),
            "Notify",
            &(
                "baton",
                replaces.unwrap_or(0),
                ICON,
                &note.summary,
                &note.body,
                acts,
                hints,
                timeout,
            ),
        )
        .await?
        .body()
        .deserialize::<u32>()
    })
}

/// Starts the click listener on `conn`'s thread of its own.
fn listen(conn: &zbus::Connection, clicks: Clicks, setup: &Setup) {
    let conn = conn.clone();
    let on_click = setup.on_click.clone();
    let shared = Arc::clone(&setup.shared);
    let spawned = std::thread::Builder::new()
        .name("baton-click".to_owned())
        .spawn(move || {
            zbus::block_on(async move {
                use futures_lite_next::next;
                // `ActivationToken` and `ActionInvoked` (and the spec's other signals,
                // skipped below).
                let rule = match zbus::MatchRule::builder()
                    .msg_type(zbus::message::Type::Signal)
                    .interface(DEST)
                    .build()
                {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!(error = %e, "Cannot listen for notification clicks.");
                        return;
                    }
                };
                let mut stream = match zbus::MessageStream::for_match_rule(rule, &conn, None).await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "Cannot listen for notification clicks.");
                        return;
                    }
                };
                let mut tokens: LruCache<u32, String> = LruCache::new(cap(TOKENS_REMEMBERED));
                while let Some(Ok(msg)) = next(&mut stream).await {
                    let member = msg.header().member().map(|m| m.to_string());
                    let Ok((id, text)) = msg.body().deserialize::<(u32, String)>() else {
                        continue;
                    };
                    match member.as_deref() {
                        Some("ActivationToken") => {
                            match valid_token(&text) {
                                Some(t) => {
                                    tokens.put(id, t.to_owned());
                                }
                                None => {
                                    diag::TokenDropped { id, bytes: text.len() }.emit(&shared.counts);
                                }
                            }
                            continue;
                        }
                        Some("ActionInvoked") => {}
                        _ => continue,
                    }
                    let token = tokens.pop(&id);
                    let target = clicks.lock().unwrap_or_else(|p| p.into_inner()).get(&id).cloned();
                    let Some(target) = target else { continue };
                    diag::NotificationClicked.emit(&shared.counts);
                    let agent = local_agent(&target);
                    let done = click::go_to(agent.as_ref(), &target, &on_click, token.as_deref());
                    tracing::info!(id, action = %text, session = %target.session, agent = ?agent.map(|a| a.pid), token = token.is_some(), ?done, "Notification clicked.");
                }
            });
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "Cannot start the notification click thread.");
    }
}

/// `StreamExt::next` without a futures dependency.
mod futures_lite_next {
    use std::future::poll_fn;
    use std::pin::Pin;

    pub async fn next<S: zbus::export::futures_core::Stream + Unpin>(s: &mut S) -> Option<S::Item> {
        poll_fn(|cx| Pin::new(&mut *s).poll_next(cx)).await
    }
}
