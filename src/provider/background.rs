//! Background work an agent launched and has not yet seen finish: the records that
//! start, finish and queue it (shared/docs/transcript-formats.md, Part D "Background
//! work"). Only Claude Code writes them; Codex rollouts have no equivalent (a long
//! `exec` session is still part of its turn).
//!
//! Kept apart from the main Claude projector: these records are rare and small, so the
//! record type, the line's length and a byte search decide whether a line is parsed a
//! second time, for these fields only. Big lines (file reads, command output, progress
//! records) are never searched.

use super::content::StrOrList;
use memchr::memmem::Finder;
use serde::Deserialize;
use std::borrow::Cow;
use std::sync::LazyLock;

/// What one record says about one background task (by its id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Background {
    /// A `run_in_background` Bash call or a background agent returned with its id.
    Started(String),
    /// The task finished while a turn ran; its notification waits to be delivered, which
    /// will start a turn on its own.
    Queued(String),
    /// The task's notification arrived (a new, system-started turn), or a background
    /// agent reported back.
    Finished(String),
    /// The task was killed (`KillShell`, `KillBash`, `TaskStop`).
    Stopped(String),
}

/// Searchers made once: building one costs more than searching a short line.
static USER: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| finders(&USER_NEEDLES));
static ASSISTANT: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| finders(&ASSISTANT_NEEDLES));

fn finders(needles: &[&'static [u8]]) -> Vec<Finder<'static>> {
    needles.iter().map(|n| Finder::new(*n)).collect()
}

/// Tools that kill a background task, by its id.
const KILL_TOOLS: [&str; 3] = ["KillShell", "KillBash", "TaskStop"];

/// Longest user or assistant line searched: a launch, notification or kill record is
/// well under a kilobyte (a kill may share its record with some text).
const MAX_SEARCHED: usize = 16 * 1024;

/// What a user record that launches (a Bash result's `backgroundTaskId` or its text,
/// an async agent's launch) or reports back (a notification) contains.
const USER_NEEDLES: [&[u8]; 4] = [
    LAUNCH_NEEDLES[0],
    LAUNCH_NEEDLES[1],
    b"-notification>",
    LAUNCH_NEEDLES[2],
];

/// What a record that launches a background task contains (a Bash result's
/// `backgroundTaskId` or its text, an async agent's launch).
pub(crate) const LAUNCH_NEEDLES: [&[u8]; 3] = [
    b"backgroundTaskId",
    b"in background with ID",
    b"agent launched",
];

/// What an assistant record that kills a task contains.
const ASSISTANT_NEEDLES: [&[u8]; 2] = [b"\"Kill", b"\"TaskStop\""];

#[derive(Deserialize)]
struct Rec<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    operation: Option<Cow<'a, str>>,
    /// A `queue-operation`'s queued prompt.
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    message: Option<Msg<'a>>,
    #[serde(rename = "toolUseResult")]
    result: Option<ToolUseResult>,
}

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(borrow)]
    content: Option<StrOrList<'a, Block<'a>>>,
}

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    input: Option<KillInput<'a>>,
    #[serde(borrow)]
    content: Option<StrOrList<'a, Text<'a>>>,
}

#[derive(Deserialize)]
struct Text<'a> {
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct KillInput<'a> {
    #[serde(borrow)]
    shell_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    task_id: Option<Cow<'a, str>>,
}

/// `toolUseResult` is an object for most tools, a string for some: anything else than
/// an object reads as "no id".
#[derive(Default)]
struct ToolUseResult {
    background_task_id: Option<String>,
    agent_id: Option<String>,
    async_launched: bool,
}

impl<'de> Deserialize<'de> for ToolUseResult {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Obj {
            #[serde(rename = "backgroundTaskId")]
            background_task_id: Option<String>,
            #[serde(rename = "agentId")]
            agent_id: Option<String>,
            status: Option<String>,
        }
        let v = serde_json::Value::deserialize(d)?;
        Ok(match serde_json::from_value::<Obj>(v) {
            Ok(o) => ToolUseResult {
                background_task_id: o.background_task_id,
                agent_id: o.agent_id,
                async_launched: o.status.as_deref() == Some("async_launched"),
            },
            Err(_) => ToolUseResult::default(),
        })
    }
}

/// Task ids are short tokens (`bash_1`, `be613ab`, a 17-hex agent id): anything longer or
/// with other characters is not taken, so a transcript cannot grow the task table with
/// arbitrary text.
fn task_id(s: &str) -> Option<String> {
    let s = s.trim();
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    ok.then(|| s.to_owned())
}

/// The text of `<tag>…</tag>` in `s`.
fn tag<'s>(s: &'s str, name: &str) -> Option<&'s str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = s.find(&open)? + open.len();
    let len = s[start..].find(&close)?;
    Some(&s[start..start + len])
}

/// The task a notification (`<task-notification>` or `<agent-notification>`) is about.
fn notification(text: &str) -> Option<(bool, String)> {
    let t = text.trim_start();
    if t.starts_with("<task-notification>") {
        let id = tag(t, "task-id").and_then(task_id)?;
        Some((true, id))
    } else if t.starts_with("<agent-notification>") {
        let id = tag(t, "agent-id")
            .or_else(|| tag(t, "task-id"))
            .and_then(task_id)?;
        Some((false, id))
    } else {
        None
    }
}

/// The id in a tool result's text, for results without a `toolUseResult` id.
fn launched(text: &str) -> Option<String> {
    let t = text.trim_start();
    if let Some(rest) = t.strip_prefix("Command running in background with ID:") {
        let id = rest.trim_start().split(['.', ' ', '\n']).next()?;
        return task_id(id);
    }
    if t.starts_with("Async agent launched") {
        let at = t.find("agentId:")? + "agentId:".len();
        let id = t[at..].trim_start().split([' ', '\n', '(', '.']).next()?;
        return task_id(id);
    }
    None
}

/// What a Claude Code record of type `ty` says about background tasks, appended to
/// `out`.
pub(crate) fn claude(ty: Option<&str>, line: &[u8], out: &mut Vec<Background>) {
    let maybe = match ty {
        Some("queue-operation") => true,
        Some("user") => line.len() <= MAX_SEARCHED && USER.iter().any(|f| f.find(line).is_some()),
        Some("assistant") => {
            line.len() <= MAX_SEARCHED && ASSISTANT.iter().any(|f| f.find(line).is_some())
        }
        _ => false,
    };
    if !maybe {
        return;
    }
    let Ok(rec) = serde_json::from_slice::<Rec<'_>>(line) else {
        return;
    };
    match rec.ty.as_deref() {
        Some("queue-operation") => {
            if rec.operation.as_deref() == Some("enqueue")
                && let Some((task, id)) = rec.content.as_deref().and_then(notification)
            {
                // A finished task's notification waits for the running turn to end; a
                // background agent's report is read inside the turn and then removed.
                out.push(if task {
                    Background::Queued(id)
                } else {
                    Background::Finished(id)
                });
            }
        }
        Some("user") => {
            if let Some(r) = &rec.result {
                if let Some(id) = r.background_task_id.as_deref().and_then(task_id) {
                    out.push(Background::Started(id));
                    return;
                }
                if r.async_launched
                    && let Some(id) = r.agent_id.as_deref().and_then(task_id)
                {
                    out.push(Background::Started(id));
                    return;
                }
            }
            let Some(msg) = &rec.message else { return };
            match &msg.content {
                Some(StrOrList::Str(s)) => {
                    if let Some((_, id)) = notification(s) {
                        out.push(Background::Finished(id));
                    }
                }
                Some(StrOrList::List(blocks)) => {
                    for b in blocks {
                        match b.ty.as_deref() {
                            Some("text") => {
                                if let Some((_, id)) = b.text.as_deref().and_then(notification) {
                                    out.push(Background::Finished(id));
                                }
                            }
                            Some("tool_result") => {
                                let text = match &b.content {
                                    Some(StrOrList::Str(s)) => Some(s.as_ref()),
                                    Some(StrOrList::List(l)) => {
                                        l.iter().find_map(|t| t.text.as_deref())
                                    }
                                    _ => None,
                                };
                                if let Some(id) = text.and_then(launched) {
                                    out.push(Background::Started(id));
                                }
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Some("assistant") => {
            let Some(Msg {
                content: Some(StrOrList::List(blocks)),
            }) = &rec.message
            else {
                return;
            };
            for b in blocks {
                if b.ty.as_deref() == Some("tool_use")
                    && b.name.as_deref().is_some_and(|n| KILL_TOOLS.contains(&n))
                    && let Some(input) = &b.input
                    && let Some(id) = input
                        .shell_id
                        .as_deref()
                        .or(input.task_id.as_deref())
                        .and_then(task_id)
                {
                    out.push(Background::Stopped(id));
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(line: &str) -> Vec<Background> {
        let ty = serde_json::from_str::<serde_json::Value>(line).unwrap()["type"]
            .as_str()
            .map(str::to_owned);
        let mut v = Vec::new();
        claude(ty.as_deref(), line.as_bytes(), &mut v);
        v
    }

    #[test]
    fn reads_every_shape() {
        // Synthetic records in the shapes of transcript-formats.md, Part D.
        assert_eq!(
            ops(
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"Command running in background with ID: bash_1"}]},"toolUseResult":{"stdout":"","backgroundTaskId":"bash_1"}}"#
            ),
            vec![Background::Started("bash_1".into())]
        );
        assert_eq!(
            ops(
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"Command running in background with ID: bae407b. Output is being written to: /tmp/x/tasks/bae407b.output"}]},"toolUseResult":"text"}"#
            ),
            vec![Background::Started("bae407b".into())]
        );
        assert_eq!(
            ops(
                r#"{"type":"queue-operation","operation":"enqueue","content":"<task-notification>\n<task-id>be613ab</task-id>\n<status>completed</status>\n</task-notification>"}"#
            ),
            vec![Background::Queued("be613ab".into())]
        );
        assert_eq!(
            ops(
                r#"{"type":"queue-operation","operation":"enqueue","content":"<agent-notification>\n<agent-id>ad9c6de</agent-id>\n<status>completed</status>\n</agent-notification>"}"#
            ),
            vec![Background::Finished("ad9c6de".into())]
        );
        assert_eq!(
            ops(
                r#"{"type":"user","message":{"content":"<task-notification>\n<task-id>be613ab</task-id>\n<status>failed</status>\n</task-notification>"}}"#
            ),
            vec![Background::Finished("be613ab".into())]
        );
        assert_eq!(
            ops(
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"x","name":"KillShell","input":{"shell_id":"bash_2"}},{"type":"tool_use","id":"y","name":"TaskStop","input":{"task_id":"bd0afab"}}]}}"#
            ),
            vec![
                Background::Stopped("bash_2".into()),
                Background::Stopped("bd0afab".into())
            ]
        );
        assert_eq!(
            ops(
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"Async agent launched successfully.\nagentId: a1b2c3d (internal ID)"}]}]}}"#
            ),
            vec![Background::Started("a1b2c3d".into())]
        );
    }

    #[test]
    fn ignores_lookalikes() {
        // A file read whose text merely mentions these strings.
        assert!(ops(r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"   1→Command running in background with ID: x"}]},"toolUseResult":{"file":{"content":"backgroundTaskId"}}}"#).is_empty());
        // A human queued prompt, and a removal (which names no task).
        assert!(ops(r#"{"type":"queue-operation","operation":"enqueue","content":"check the background job"}"#).is_empty());
        assert!(ops(r#"{"type":"queue-operation","operation":"remove"}"#).is_empty());
        // Ids that are not short tokens.
        assert!(ops(r#"{"type":"user","message":{"content":"<task-notification><task-id>a b; rm</task-id></task-notification>"}}"#).is_empty());
    }
}
