//! Serde helpers shared by the JSON projectors: borrowed strings, and a content field that
//! may be a plain string or an array of blocks, read without building a `Value`.

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// A field that is either a string or a list of `B`.
#[derive(Debug)]
pub enum StrOrList<'a, B> {
    Str(Cow<'a, str>),
    List(Vec<B>),
    Other,
}

impl<'de: 'a, 'a, B: Deserialize<'de>> Deserialize<'de> for StrOrList<'a, B> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a, B>(PhantomData<(&'a (), B)>);
        impl<'de: 'a, 'a, B: Deserialize<'de>> Visitor<'de> for V<'a, B> {
            type Value = StrOrList<'a, B>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a list")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(StrOrList::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(StrOrList::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(StrOrList::Str(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(b) = seq.next_element()? {
                    out.push(b);
                }
                Ok(StrOrList::List(out))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                IgnoredAny::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(StrOrList::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(StrOrList::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(StrOrList::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(StrOrList::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(StrOrList::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(StrOrList::Other)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A content field's blocks, and the text it holds: the texts `text_of` finds in its
/// blocks joined by newlines, or the whole of a plain string (which has no blocks).
pub fn blocks_and_text<'m, B>(
    content: Option<&'m StrOrList<'_, B>>,
    text_of: impl Fn(&B) -> Option<&str>,
) -> (&'m [B], String) {
    match content {
        Some(StrOrList::List(b)) => (
            b,
            b.iter().filter_map(text_of).collect::<Vec<_>>().join("\n"),
        ),
        Some(StrOrList::Str(s)) => (&[], s.to_string()),
        _ => (&[], String::new()),
    }
}

/// A field read as text where it is a string, and ignored (`None`) where it is any other
/// value, so a record with an odd value there still parses.
pub type AnyText<'a> = StrOrList<'a, IgnoredAny>;

/// The non-empty string of an [`AnyText`] field.
pub fn text_of<'s>(field: Option<&'s AnyText<'_>>) -> Option<&'s str> {
    match field? {
        StrOrList::Str(s) if !s.is_empty() => Some(s),
        _ => None,
    }
}

/// How much of a text field is kept: far more than any message shows.
pub const TEXT_KEEP: usize = 16 * 1024;

/// A text field cut to its first [`TEXT_KEEP`] bytes after leading whitespace, borrowed
/// when the JSON allows. A multi-MB answer or tool output must not be copied whole: the
/// projectors only look at its start.
#[derive(Debug)]
pub struct Clipped<'a>(pub Cow<'a, str>);

impl std::ops::Deref for Clipped<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// The first [`TEXT_KEEP`] bytes of `s` after leading whitespace, cut on a character
/// boundary.
pub fn clip_text(s: &str) -> &str {
    let s = s.trim_start();
    let mut end = TEXT_KEEP.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

impl<'de: 'a, 'a> Deserialize<'de> for Clipped<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Clipped<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Clipped(Cow::Borrowed(clip_text(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Clipped(Cow::Owned(clip_text(v).to_owned())))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

/// A field that is a string, or something else whose first key (for objects) names it:
/// Codex writes `codex_error_info` both as `"usage_limit_exceeded"` and as
/// `{"response_stream_disconnected":{…}}`.
#[derive(Debug, Default)]
pub struct Tag(pub Option<String>);

impl<'de> Deserialize<'de> for Tag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Tag;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an object")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Tag, E> {
                Ok(Tag(Some(v.to_owned())))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Tag, A::Error> {
                let mut first = None;
                while let Some(k) = map.next_key::<Cow<'de, str>>()? {
                    map.next_value::<IgnoredAny>()?;
                    if first.is_none() {
                        first = Some(k.into_owned());
                    }
                }
                Ok(Tag(first))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tag, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Tag(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Tag, E> {
                Ok(Tag(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Tag, E> {
                Ok(Tag(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Tag, E> {
                Ok(Tag(None))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Tag, E> {
                Ok(Tag(Some(v.to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Tag, E> {
                Ok(Tag(Some(v.to_string())))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Tag, E> {
                Ok(Tag(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// Parses `…|<epoch seconds>` or `resets <when>` out of a limit message.
pub fn reset_hint(text: &str) -> Option<String> {
    if let Some((_, tail)) = text.rsplit_once('|') {
        let digits = tail.trim();
        if !digits.is_empty() && digits.len() <= 12 && digits.bytes().all(|b| b.is_ascii_digit()) {
            let secs: i64 = digits.parse().ok()?;
            return Some(crate::clock::format_rfc3339(secs * 1000));
        }
    }
    let lower = text.to_ascii_lowercase();
    if let Some(at) = lower.find("resets ").map(|i| i + "resets ".len()) {
        let when = text.get(at..)?.trim();
        let when: String = when.chars().take(80).collect();
        return (!when.is_empty()).then_some(when);
    }
    // Codex: "… or try again at 10:24 AM." (transcript-formats.md E.2).
    let at = lower
        .rfind("try again at ")
        .map(|i| i + "try again at ".len())?;
    let when = text.get(at..)?.trim();
    let when = when.strip_suffix('.').unwrap_or(when).trim();
    let when: String = when.chars().take(80).collect();
    (!when.is_empty()).then_some(when)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_hints() {
        assert_eq!(
            reset_hint("Claude AI usage limit reached|1751997600").as_deref(),
            Some("2025-07-08T18:00:00.000Z")
        );
        assert_eq!(
            reset_hint("You've hit your session limit · resets 5:40pm (Europe/Madrid)").as_deref(),
            Some("5:40pm (Europe/Madrid)")
        );
        assert_eq!(reset_hint("API Error: 529 Overloaded"), None);
        assert_eq!(
            reset_hint(
                "You've hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro) \
                 or try again at 10:24 AM."
            )
            .as_deref(),
            Some("10:24 AM")
        );
    }
}
