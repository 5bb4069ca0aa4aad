//! The `status` table's key for a session: a [`SessionKey`] in 24 bytes.

use crate::model::{ProviderKind, SessionKey};

/// A session's key as the table holds it, in its order ([`SessionKey`]'s): the session id
/// and the agent's name in one allocation, 24 bytes in a B-tree node where a
/// `SessionKey` takes 56 (one per session: 100,000 at a year of heavy use).
#[derive(Debug)]
pub(super) enum Key {
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

impl Key {
    pub(super) fn new(k: &SessionKey) -> Key {
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

    /// Provider, session id and agent: what [`SessionKey`] orders by, in its order.
    fn parts(&self) -> (ProviderKind, &str, Option<&str>) {
        match self {
            Key::Short {
                text,
                split,
                provider,
                has_agent,
            } => {
                // `split` is where the session id ended when `text` was made: a boundary.
                let (session, agent) = text.split_at_checked(*split as usize).unwrap_or((text, ""));
                (*provider, session, has_agent.then_some(agent))
            }
            Key::Long(k) => (k.provider, &k.session, k.agent.as_deref()),
        }
    }

    pub(super) fn key(&self) -> SessionKey {
        let (provider, session, agent) = self.parts();
        SessionKey {
            provider,
            session: session.to_owned(),
            agent: agent.map(str::to_owned),
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        self.parts().cmp(&other.parts())
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

    proptest::proptest! {
        /// The table's key orders and compares as the session key it stands for, and
        /// gives it back: among others a session id that is a prefix of another with an
        /// agent after it, and an empty agent's name.
        #[test]
        fn the_table_key_orders_as_the_session_key(
            keys in proptest::collection::vec(
                (0..3usize, "[ab\\x00é]{0,3}", proptest::option::of("[ab\\x00]{0,2}")),
                0..24,
            )
        ) {
            let providers = [ProviderKind::Claude, ProviderKind::Codex, ProviderKind::Pi];
            let keys: Vec<SessionKey> = keys
                .iter()
                .map(|(p, s, a)| session_key(providers[*p], s, a.as_deref()))
                .collect();
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
