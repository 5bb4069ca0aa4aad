//! The `status` table's key for a session: a [`SessionKey`] in 24 bytes.

use crate::model::{ProviderKind, SessionKey};
use std::cmp::Ordering;

/// A session's key as the table holds it, in its order ([`SessionKey`]'s): the session id
/// and the agent's name in one allocation, 24 bytes in a B-tree node where a
/// `SessionKey` takes 56 (one per session: 100,000 at a year of heavy use).
#[derive(Debug)]
pub(super) enum Key {
    /// A main session whose id is a UUID as Claude Code and Codex write them (lowercase,
    /// hyphenated): its 16 bytes, with no allocation (one of 48 bytes a session
    /// otherwise: 4.4 MB at 100,000 sessions). Their byte order is the text's order.
    Uuid {
        bytes: [u8; 16],
        provider: ProviderKind,
    },
    Short {
        /// The session id, then the agent's name if there is one.
        text: Box<str>,
        /// Where the session id ends in `text`.
        split: u32,
        provider: ProviderKind,
        has_agent: bool,
    },
    /// A session id of 4 GiB or more (a line is far shorter: never, in practice).
    Long(Box<SessionKey>),
}

const _: () = assert!(size_of::<Key>() <= 24);

/// Where a hyphen stands in a UUID's text.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];
const HEX: &[u8; 16] = b"0123456789abcdef";

/// The 16 bytes of `text` if it is a UUID in lowercase hyphenated form; any other text
/// (upper case, braces, another length) is kept as text.
fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    let t = text.as_bytes();
    if t.len() != 36 || HYPHENS.iter().any(|&i| t[i] != b'-') {
        return None;
    }
    let mut nibbles = t
        .iter()
        .enumerate()
        .filter(|(i, _)| !HYPHENS.contains(i))
        .map(|(_, c)| HEX.iter().position(|h| h == c));
    let mut out = [0u8; 16];
    for b in &mut out {
        *b = u8::try_from((nibbles.next()?? << 4) | nibbles.next()??).ok()?;
    }
    Some(out)
}

/// The text of a UUID's 16 bytes (the inverse of [`uuid_bytes`]).
fn uuid_text(bytes: &[u8; 16]) -> [u8; 36] {
    let mut out = [b'-'; 36];
    let mut at = 0;
    for b in bytes {
        for n in [b >> 4, b & 15] {
            while HYPHENS.contains(&at) {
                at += 1;
            }
            out[at] = HEX[usize::from(n)];
            at += 1;
        }
    }
    out
}

impl Key {
    pub(super) fn new(k: &SessionKey) -> Key {
        if k.agent.is_none()
            && let Some(bytes) = uuid_bytes(&k.session)
        {
            return Key::Uuid {
                bytes,
                provider: k.provider,
            };
        }
        let Ok(split) = u32::try_from(k.session.len()) else {
            return Key::Long(Box::new(k.clone()));
        };
        let mut text =
            String::with_capacity(k.session.len() + k.agent.as_ref().map_or(0, String::len));
        text.push_str(&k.session);
        text.extend(k.agent.as_deref());
        Key::Short {
            text: text.into_boxed_str(),
            split,
            provider: k.provider,
            has_agent: k.agent.is_some(),
        }
    }

    /// Provider, session id and agent, what [`SessionKey`] orders by, in its order, handed
    /// to `f` (a UUID's text is made on the stack for it).
    fn with_parts<R>(&self, f: impl FnOnce((ProviderKind, &str, Option<&str>)) -> R) -> R {
        match self {
            Key::Uuid { bytes, provider } => {
                let text = uuid_text(bytes);
                // Made of ASCII hex digits and hyphens: always UTF-8.
                f((*provider, std::str::from_utf8(&text).unwrap_or(""), None))
            }
            Key::Short {
                text,
                split,
                provider,
                has_agent,
            } => {
                // `split` is where the session id ended when `text` was made: a boundary.
                let (session, agent) = text.split_at_checked(*split as usize).unwrap_or((text, ""));
                f((*provider, session, has_agent.then_some(agent)))
            }
            Key::Long(k) => f((k.provider, &k.session, k.agent.as_deref())),
        }
    }

    pub(super) fn key(&self) -> SessionKey {
        self.with_parts(|(provider, session, agent)| SessionKey {
            provider,
            session: session.to_owned(),
            agent: agent.map(str::to_owned),
        })
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        match (self, other) {
            // Most keys, most comparisons: no text made.
            (
                Key::Uuid { bytes, provider },
                Key::Uuid {
                    bytes: b,
                    provider: p,
                },
            ) => (provider, bytes).cmp(&(p, b)),
            _ => self.with_parts(|a| other.with_parts(|b| a.cmp(&b))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session_key(provider: ProviderKind, session: &str, agent: Option<&str>) -> SessionKey {
        SessionKey {
            provider,
            session: session.to_owned(),
            agent: agent.map(str::to_owned),
        }
    }

    #[test]
    fn a_lowercase_uuid_is_kept_as_its_bytes() {
        let id = "0f379075-b3cf-20d9-8373-bb0b1d7c4454";
        let k = Key::new(&session_key(ProviderKind::Claude, id, None));
        assert!(matches!(k, Key::Uuid { .. }));
        assert_eq!(k.key().session, id);
        for other in [
            "0F379075-B3CF-20D9-8373-BB0B1D7C4454",
            "0f379075b3cf20d98373bb0b1d7c4454",
            "0f379075-b3cf-20d9-8373-bb0b1d7c445g",
            "{0f379075-b3cf-20d9-8373-bb0b1d7c44}",
        ] {
            let k = Key::new(&session_key(ProviderKind::Claude, other, None));
            assert!(matches!(k, Key::Short { .. }), "{other}");
            assert_eq!(k.key().session, other);
        }
        let sub = Key::new(&session_key(ProviderKind::Claude, id, Some("agent-1")));
        assert!(
            matches!(sub, Key::Short { .. }),
            "a sub-agent's key keeps its text"
        );
    }

    proptest::proptest! {
        /// The table's key orders and compares as the session key it stands for, and
        /// gives it back: among others a session id that is a prefix of another with an
        /// agent after it, and an empty agent's name.
        #[test]
        fn the_table_key_orders_as_the_session_key(
            keys in proptest::collection::vec(
                (0..3usize, "[ab\\x00é]{0,3}", proptest::option::of("[ab\\x00]{0,2}")),
                0..24,
            ),
            uuids in proptest::collection::vec(
                (0..3usize, proptest::num::u128::ANY, 0..4u8, proptest::option::of("[ab]{0,2}")),
                0..16,
            )
        ) {
            let providers = [ProviderKind::Claude, ProviderKind::Codex, ProviderKind::Pi];
            let mut keys: Vec<SessionKey> = keys
                .iter()
                .map(|(p, s, a)| session_key(providers[*p], s, a.as_deref()))
                .collect();
            // UUIDs (some sharing their first digits, some upper case, some with an agent)
            // among the short texts.
            keys.extend(uuids.iter().map(|(p, n, form, a)| {
                let n = if *form == 1 { n & !0xffff_ffff } else { *n };
                let mut text = format!("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                    n >> 96, (n >> 80) & 0xffff, (n >> 64) & 0xffff, (n >> 48) & 0xffff,
                    n & 0xffff_ffff_ffff);
                if *form == 2 {
                    text = text.to_uppercase();
                }
                session_key(providers[*p], &text, a.as_deref())
            }));
            for a in &keys {
                proptest::prop_assert_eq!(&Key::new(a).key(), a);
                for b in &keys {
                    proptest::prop_assert_eq!(Key::new(a).cmp(&Key::new(b)), a.cmp(b), "{:?} {:?}", a, b);
                    proptest::prop_assert_eq!(Key::new(a) == Key::new(b), a == b);
                }
            }
        }
    }
}
