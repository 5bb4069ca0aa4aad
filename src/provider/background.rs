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
/// an async agent's or a teammate's launch) or reports back (a notification) contains.
const USER_NEEDLES: [&[u8]; 6] = [
    LAUNCH_NEEDLES[0],
    LAUNCH_NEEDLES[1],
    b"-notification>",
    LAUNCH_NEEDLES[2],
    LAUNCH_NEEDLES[3],
    LAUNCH_NEEDLES[4],
];

/// What a record that launches a background task contains (a Bash result's
/// `backgroundTaskId` or its text, an async agent's launch, a teammate's launch, a
/// command moved to the background after its timeout).
pub(crate) const LAUNCH_NEEDLES: [&[u8]; 5] = [
    b"backgroundTaskId",
    b"in background with ID",
    b"agent launched",
    b"teammate_spawned",
    b"moved to the background",
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
    /// A teammate (agent teams) started: its name, which its messages are signed with.
    teammate: Option<String>,
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
            name: Option<String>,
            teammate_id: Option<String>,
        }
        let v = serde_json::Value::deserialize(d)?;
        Ok(match serde_json::from_value::<Obj>(v) {
            Ok(o) => ToolUseResult {
                teammate: (o.status.as_deref() == Some("teammate_spawned"))
                    .then(|| o.name.or(o.teammate_id))
                    .flatten()
                    .as_deref()
                    .and_then(teammate_name),
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

/// A teammate's name as its messages sign it: `rev` for the id `rev@core`.
fn teammate_name(s: &str) -> Option<String> {
    task_id(s.split('@').next().unwrap_or_default())
}

/// The teammates a peer message is from: the `teammate_id` of each
/// `<teammate-message>` in `text` and the `from` of each `<agent-message>`, then
/// `sender` (the `origin.from` of the meta form).
pub(crate) fn teammates(text: &str, sender: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (open, attr) in [
        ("<teammate-message", "teammate_id=\""),
        ("<agent-message", "from=\""),
    ] {
        for (at, _) in text.match_indices(open) {
            let head = &text[at..];
            let head = &head[..head.find('>').unwrap_or(head.len())];
            let Some(v) = head.find(attr).map(|i| &head[i + attr.len()..]) else {
                continue;
            };
            if let Some(name) = v.split('"').next().and_then(teammate_name)
                && !out.contains(&name)
            {
                out.push(name);
            }
        }
    }
    if let Some(name) = sender.and_then(teammate_name)
        && !out.contains(&name)
    {
        out.push(name);
    }
    out
}

/// Whether every message a peer record carries is a teammate's idle notification (a
/// status line, not a report): `{"type":"idle_notification",…}` as the body.
pub(crate) fn only_idle(text: &str) -> bool {
    #[derive(Deserialize)]
    struct Status<'a> {
        #[serde(rename = "type", borrow)]
        ty: Option<Cow<'a, str>>,
    }
    let mut any = false;
    for close in ["</teammate-message>", "</agent-message>"] {
        for (end, _) in text.match_indices(close) {
            let before = &text[..end];
            let Some(open) = before.rfind('<') else {
                return false;
            };
            let Some(gt) = before[open..].find('>') else {
                return false;
            };
            let body = before[open + gt + 1..].trim();
            let idle = serde_json::from_str::<Status<'_>>(body)
                .is_ok_and(|s| s.ty.as_deref() == Some("idle_notification"));
            if !idle {
                return false;
            }
            any = true;
        }
    }
    any
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
    if t.starts_with("Command did not complete within")
        && let Some(at) = t.find("moved to the background (ID:")
    {
        // The command hit its timeout and went on as a background task.
        let rest = &t[at + "moved to the background (ID:".len()..];
        let id = rest.trim_start().split([')', ' ', '\n']).next()?;
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
                if let Some(name) = &r.teammate {
                    out.push(Background::Started(name.clone()));
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
    fn reads_teammates_and_timed_out_commands() {
        // Synthetic records in the shapes of transcript-formats.md, Part E.1.
        assert_eq!(
            ops(
                r#"{"type":"user","message":{"content":[{"tool_use_id":"t","type":"tool_result","content":[{"type":"text","text":"Spawned successfully."}]}]},"toolUseResult":{"status":"teammate_spawned","teammate_id":"rev@core","agent_id":"rev@core","name":"rev","team_name":"core"}}"#
            ),
            vec![Background::Started("rev".into())]
        );
        assert_eq!(
            ops(
                r#"{"type":"user","message":{"content":[{"tool_use_id":"t","type":"tool_result","content":"Command did not complete within its 120s timeout and was moved to the background (ID: b7x2k9q). Output is being written to: /tmp/b7x2k9q.output"}]},"toolUseResult":{"stdout":""}}"#
            ),
            vec![Background::Started("b7x2k9q".into())]
        );
        let two = "Another Claude session sent a message:\n<teammate-message teammate_id=\"a-1\" color=\"blue\">\n{\"type\":\"idle_notification\",\"from\":\"a-1\"}\n</teammate-message>\n<teammate-message teammate_id=\"b@core\">{\"type\":\"idle_notification\"}</teammate-message>";
        assert_eq!(teammates(two, None), ["a-1", "b"]);
        assert!(only_idle(two));
        let report = "<teammate-message teammate_id=\"a-1\" summary=\"done\">Found 2 bugs.</teammate-message>";
        assert!(!only_idle(report));
        let meta = "Another Claude session sent a message:\n<agent-message from=\"design-review\">Done.</agent-message>";
        assert_eq!(teammates(meta, Some("design-review")), ["design-review"]);
        assert!(!only_idle(meta));
        // A name that is not a short token is not taken.
        assert!(
            teammates(
                "<teammate-message teammate_id=\"a b;rm\">x</teammate-message>",
                None
            )
            .is_empty()
        );
        assert!(!only_idle("no messages here"));
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
