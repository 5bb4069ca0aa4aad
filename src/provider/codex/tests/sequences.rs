//! Records read in the light of the ones before them: a forked child's copy of its
//! parent's history, and an escalation request under the approval policy a
//! `turn_context` set. Here a line alone proves nothing; the state it is read in is
//! what the fast path must respect.

use super::super::CodexProjector;
use super::super::plain::looks_plain;
use super::{PATH, Route, run};
use crate::provider::{Obs, Projector};
use serde_json::json;
use std::path::Path;

/// A forked child's rollout: its meta, the parent's meta, a copy of the parent's history
/// in Codex's own layout (plain records among them) all at one time, then the child's own
/// turn. Inside the copy every record's time counts, so the fast path must stand aside.
#[test]
fn a_forked_childs_copy_projects_the_same_both_ways() {
    let at = |ts: &str, ty: &str, payload: &str| {
        format!("{{\"timestamp\":\"{ts}\",\"type\":\"{ty}\",\"payload\":{payload}}}")
    };
    let copy = "2026-03-01T10:00:00.000Z";
    let own = "2026-03-01T10:00:07.000Z";
    let lines = [
        at(
            copy,
            "session_meta",
            r#"{"id":"019c0000-0000-7000-8000-00000000000c","forked_from_id":"019c0000-0000-7000-8000-00000000000a"}"#,
        ),
        at(
            copy,
            "session_meta",
            r#"{"id":"019c0000-0000-7000-8000-00000000000a"}"#,
        ),
        at(
            copy,
            "event_msg",
            r#"{"type":"task_started","turn_id":"parent-turn"}"#,
        ),
        at(
            copy,
            "turn_context",
            r#"{"turn_id":"parent-turn","cwd":"/x"}"#,
        ),
        at(
            copy,
            "response_item",
            r#"{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c1"}"#,
        ),
        at(
            copy,
            "response_item",
            r#"{"type":"function_call_output","call_id":"c1","output":"ok"}"#,
        ),
        // The first record with a later time ends the copy, and is the child's own.
        at(
            own,
            "response_item",
            r#"{"type":"reasoning","summary":[],"content":null}"#,
        ),
        at(
            own,
            "event_msg",
            r#"{"type":"task_started","turn_id":"child-turn"}"#,
        ),
        at(
            own,
            "event_msg",
            r#"{"type":"agent_reasoning","text":"hm"}"#,
        ),
        at(
            own,
            "event_msg",
            r#"{"type":"task_complete","turn_id":"child-turn","last_agent_message":"done"}"#,
        ),
    ];
    let mut states =
        [Route::Fast, Route::Full].map(|_| CodexProjector::new(Path::new(PATH)).save());
    let mut outs: [Vec<Obs>; 2] = [Vec::new(), Vec::new()];
    for line in &lines {
        assert!(
            line.contains("session_meta") || line.contains("task_") || looks_plain(line.as_bytes())
        );
        for (n, route) in [Route::Fast, Route::Full].into_iter().enumerate() {
            let (obs, res, after) = run(&states[n], line.as_bytes(), route);
            assert_eq!(res, Ok(()));
            outs[n].extend(obs);
            states[n] = after;
        }
        assert_eq!(states[0], states[1], "after {line}");
    }
    assert_eq!(outs[0], outs[1]);
    // The child's own reasoning, after the copy, is seen.
    assert!(
        outs[0]
            .iter()
            .any(|o| o.record_ts.is_some_and(|t| t > 1_772_359_200_000))
    );
}

/// An `exec_command` call asking to run outside the sandbox (F.4), with `policy` set by
/// the `turn_context` before it.
fn escalation_obs(policy: &str, route: Route) -> Vec<Obs> {
    let fresh = CodexProjector::new(Path::new(PATH)).save();
    let ctx = format!(
        r#"{{"timestamp":"2026-11-20T10:00:00.000Z","type":"turn_context","payload":{{"cwd":"/x","approval_policy":"{policy}","sandbox_policy":{{"type":"workspace-write"}}}}}}"#
    );
    let (_, res, state) = run(&fresh, ctx.as_bytes(), route);
    res.unwrap();
    let args = serde_json::to_string(&json!({
        "cmd": "npm run dev",
        "sandbox_permissions": "require_escalated",
        "justification": "Do you want to allow restarting the <local> test server?"
    }))
    .unwrap();
    let call = json!({"timestamp":"2026-11-20T10:00:01.000Z","type":"response_item",
        "payload":{"type":"function_call","name":"exec_command","arguments":args,"call_id":"call_e1"}});
    let (obs, res, _) = run(&state, call.to_string().as_bytes(), route);
    res.unwrap();
    obs
}

#[test]
fn an_escalation_request_waits_for_the_person_only_under_a_policy_that_asks() {
    use crate::provider::ObsKind;
    for route in [Route::Fast, Route::Full] {
        for policy in ["on-request", "untrusted"] {
            let obs = escalation_obs(policy, route);
            let [o] = obs.as_slice() else {
                panic!("{obs:?}")
            };
            let ObsKind::ToolCall {
                id,
                needs_input,
                message,
            } = &o.kind
            else {
                panic!("{o:?}")
            };
            assert_eq!(id, "call_e1");
            assert_eq!(
                needs_input.as_deref(),
                Some("approval"),
                "{policy} {route:?}"
            );
            assert_eq!(
                message.as_deref(),
                Some("Do you want to allow restarting the <local> test server?")
            );
        }
        let obs = escalation_obs("never", route);
        assert!(
            matches!(obs.as_slice(), [o] if matches!(&o.kind, ObsKind::ToolCall { needs_input: None, .. })),
            "{obs:?}"
        );
    }
}
