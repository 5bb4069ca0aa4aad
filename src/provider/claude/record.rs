//! What a Claude Code transcript line holds, as the projector reads it: the serde view
//! of a record, only the fields that can change a turn's state.

use super::super::content::{Clipped, StrOrList};
use serde::Deserialize;
use serde::de::IgnoredAny;
use std::borrow::Cow;

#[derive(Deserialize)]
pub(crate) struct Rec<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) subtype: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) uuid: Option<Cow<'a, str>>,
    #[serde(rename = "parentUuid", borrow)]
    pub(crate) parent: Option<Cow<'a, str>>,
    /// Read by `check` only: the record roots a chain after compaction.
    #[serde(rename = "logicalParentUuid")]
    pub(crate) logical_parent: Option<IgnoredAny>,
    #[serde(rename = "sessionId", borrow)]
    pub(super) session: Option<Cow<'a, str>>,
    #[serde(rename = "agentId", borrow)]
    pub(crate) agent: Option<Cow<'a, str>>,
    #[serde(rename = "isSidechain")]
    pub(crate) sidechain: Option<bool>,
    #[serde(rename = "isMeta")]
    pub(crate) meta: Option<bool>,
    #[serde(rename = "isCompactSummary")]
    pub(crate) compact_summary: Option<bool>,
    #[serde(rename = "isApiErrorMessage")]
    pub(super) api_error: Option<bool>,
    pub(super) error: Option<super::super::content::Tag>,
    #[serde(borrow)]
    pub(super) timestamp: Option<Cow<'a, str>>,
    /// The working directory (Windows paths come JSON-escaped: `C:\\Users\\me\\app`).
    #[serde(borrow)]
    pub(super) cwd: Option<super::super::content::AnyText<'a>>,
    #[serde(borrow)]
    pub(crate) message: Option<Msg<'a>>,
    #[serde(rename = "toolUseResult")]
    pub(crate) tool_use_result: Option<IgnoredAny>,
    #[serde(rename = "toolEndsTurn")]
    pub(super) tool_ends_turn: Option<bool>,
    #[serde(borrow)]
    pub(super) origin: Option<Origin<'a>>,
    /// Where the turn came from, in 2.1.27x and later (transcript-formats.md E.5).
    /// Read as a tag: a value of another shape is an unknown origin, not a bad line.
    #[serde(rename = "turnOrigin")]
    pub(super) turn_origin: Option<super::super::content::Tag>,
    /// A skill body delivered as a user record (E.5): never a prompt.
    #[serde(rename = "turnCompanion")]
    pub(super) turn_companion: Option<bool>,
    #[serde(rename = "preventedContinuation")]
    pub(super) prevented_continuation: Option<bool>,
    #[serde(rename = "compactMetadata")]
    pub(super) compact: Option<CompactMeta>,
    /// The git branch the session is on (every record of Claude Code's carries it).
    #[serde(rename = "gitBranch", borrow)]
    pub(super) git_branch: Option<Cow<'a, str>>,
    /// `progress` records: what is in progress (e.g. a Stop hook running).
    #[serde(borrow)]
    pub(super) data: Option<Progress<'a>>,
    /// The Claude Code release that wrote the record ([`Version::of`]).
    #[serde(borrow)]
    pub(super) version: Option<super::super::content::AnyText<'a>>,
}

/// Whether `line` is an assistant record stamped with a tool call's stop that holds no
/// call (a thinking or text block of a tool-calling response, in a file that stamps
/// every block).
pub(super) fn stamps_without_call(line: &[u8]) -> bool {
    // Mended as the projector mends a line (invalid UTF-8, a clobbered head).
    crate::provider::line_is!(line, Rec<'_>, |rec| {
        rec.ty.as_deref() == Some("assistant")
            && rec.message.as_ref().is_some_and(|msg| {
                let calls = match &msg.content {
                    Some(StrOrList::List(blocks)) => blocks
                        .iter()
                        .any(|b| matches!(b.ty.as_deref(), Some("tool_use" | "server_tool_use"))),
                    _ => false,
                };
                msg.stop_reason.as_deref() == Some("tool_use") && !calls
            })
    })
}

/// Whether `line` is an assistant record whose text without a stop would be read
/// otherwise in a file that stamps every block: it has no stop, and its version does
/// not tell ([`Version::stamps_every_block`]).
pub(super) fn needs_stamps(line: &[u8]) -> bool {
    /// Only what decides, so that the parse allocates nothing.
    #[derive(Deserialize)]
    struct Stop<'a> {
        #[serde(rename = "type", borrow)]
        ty: Option<Cow<'a, str>>,
        #[serde(borrow)]
        message: Option<StopMsg<'a>>,
        #[serde(borrow)]
        version: Option<super::super::content::AnyText<'a>>,
    }
    #[derive(Deserialize)]
    struct StopMsg<'a> {
        #[serde(borrow)]
        stop_reason: Option<Cow<'a, str>>,
    }
    // A line that does not parse as it is may parse once mended (invalid UTF-8): yes.
    let Ok(rec) = serde_json::from_slice::<Stop<'_>>(line) else {
        return true;
    };
    rec.ty.as_deref() == Some("assistant")
        && rec.message.is_some_and(|m| m.stop_reason.is_none())
        && Version::of(rec.version.as_ref())
            .stamps_every_block()
            .is_none()
}

/// A `version` field as `(major, minor, patch)`; a value of another shape, or a string
/// that is no `x.y.z`, is no version (and the record still parses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Version(pub(super) Option<(u32, u32, u32)>);

impl Version {
    /// A record's `version` field.
    pub(super) fn of(field: Option<&super::super::content::AnyText<'_>>) -> Self {
        super::super::content::text_of(field).map_or(Self(None), Self::parse)
    }

    pub(super) fn parse(s: &str) -> Self {
        let mut parts = s.splitn(3, '.');
        let mut num = || {
            let p = parts.next()?;
            // `2.1.239-beta`: the patch is the leading digits.
            let digits = p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len());
            p.get(..digits)?.parse::<u32>().ok()
        };
        Self((|| Some((num()?, num()?, num()?)))())
    }

    /// The version a line names in `"version":"x.y.z"` (as Claude Code writes it), the
    /// key standing at `at`: a look at the bytes, for a prefilter.
    pub(super) fn named_at(line: &[u8], at: usize) -> Option<Self> {
        let value = line.get(at..)?.strip_prefix(b"\"version\":\"")?;
        let end = memchr::memchr2(b'"', b'\\', value)?;
        if value.get(end) != Some(&b'"') {
            return None;
        }
        std::str::from_utf8(&value[..end]).ok().map(Self::parse)
    }

    /// Whether this release stamps `stop_reason` on every block of a response, so that
    /// a text block without one is mid-response, never an answer: `Some(true)` from
    /// 2.1.23x on (transcript-formats.md D.1, F.3), `Some(false)` up to 2.1.152 (null
    /// stops, or stops on the last block only: A.4, the corpus), `None` between them
    /// and without a version (the file's own blocks tell).
    pub(super) fn stamps_every_block(self) -> Option<bool> {
        let v = self.0?;
        if v >= (2, 1, 230) {
            Some(true)
        } else if v <= (2, 1, 152) {
            Some(false)
        } else {
            None
        }
    }
}

#[derive(Deserialize)]
pub(super) struct Progress<'a> {
    #[serde(rename = "type", borrow)]
    pub(super) ty: Option<Cow<'a, str>>,
    #[serde(rename = "hookEvent", borrow)]
    pub(super) hook_event: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(super) struct CompactMeta {
    #[serde(rename = "preTokens")]
    pub(super) pre_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct Origin<'a> {
    #[serde(borrow)]
    pub(super) kind: Option<Cow<'a, str>>,
    /// A peer message's sender (the teammate's name).
    #[serde(borrow)]
    pub(super) from: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(crate) struct Msg<'a> {
    /// Read by `check` only: the model response this message is part of.
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) model: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) content: Option<StrOrList<'a, Block<'a>>>,
    #[serde(borrow)]
    pub(super) stop_reason: Option<Cow<'a, str>>,
    pub(super) usage: Option<Usage>,
}

#[derive(Deserialize)]
pub(super) struct Usage {
    pub(super) server_tool_use: Option<IgnoredAny>,
    pub(super) iterations: Option<IgnoredAny>,
}

#[derive(Deserialize)]
pub(crate) struct Block<'a> {
    #[serde(rename = "type", borrow)]
    pub(crate) ty: Option<Cow<'a, str>>,
    // Only the start of a text is looked at; an answer can be megabytes.
    #[serde(borrow)]
    pub(crate) text: Option<Clipped<'a>>,
    #[serde(borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) tool_use_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) input: Option<Input<'a>>,
}

#[derive(Deserialize)]
pub(super) struct Input<'a> {
    #[serde(borrow)]
    pub(super) questions: Option<Vec<Question<'a>>>,
    #[serde(borrow)]
    pub(super) plan: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(super) struct Question<'a> {
    #[serde(borrow)]
    pub(super) question: Option<Cow<'a, str>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_tells_whether_its_writer_stamps_every_block() {
        for (v, stamps) in [
            ("1.0.98", Some(false)),
            ("2.1.39", Some(false)),
            ("2.1.152", Some(false)),
            ("2.1.153", None),
            ("2.1.229", None),
            ("2.1.230", Some(true)),
            ("2.1.289", Some(true)),
            ("2.1.239-beta.1", Some(true)),
            ("3.0.0", Some(true)),
            ("2.1", None),
            ("two", None),
            ("", None),
        ] {
            assert_eq!(Version::parse(v).stamps_every_block(), stamps, "{v}");
        }
        // Named as Claude Code writes it; otherwise not.
        for (line, named) in [
            (
                &br#"{"version":"2.1.39","message":{}}"#[..],
                Some((2, 1, 39)),
            ),
            (br#"{"version":"2.1.239"}"#, Some((2, 1, 239))),
            (br#"{"version": "2.1.39"}"#, None),
            (br#"{"version":"2.1.3\u0039"}"#, None),
            (br#"{"version":2}"#, None),
        ] {
            assert_eq!(
                Version::named_at(line, 1).and_then(|v| v.0),
                named,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // A value of another shape is no version, and the record still parses.
        for other in ["2", "null", "{\"a\":[1]}", "[\"2.1.239\"]", "true"] {
            let line = format!(r#"{{"type":"assistant","version":{other}}}"#);
            let rec: Rec<'_> =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{other}: {e}"));
            assert_eq!(Version::of(rec.version.as_ref()), Version(None), "{other}");
        }
    }
}
