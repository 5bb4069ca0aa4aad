//! Where a file can be read from other than its first byte: which records start a turn of
//! the file's main conversation with an id of their own (a safe restart point for a
//! fresh projector), and which records, earlier in the file, hold context a restart would
//! lose. Used by the tail-first read, which finds a session's state from its last turns
//! instead of every byte.

use super::{Obs, ObsKind, projector_for};
use crate::model::ProviderKind;
use memchr::memmem::Finder;
use std::path::Path;

/// What one line means for a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restart {
    /// Not a turn start, or not one of the main conversation: read past it.
    No,
    /// Starts the main conversation's turn with this id, whatever came before it.
    At(String),
    /// Not a turn start here, but whether it is one depends on what came before (so a
    /// read that skips the records before it cannot tell).
    Maybe,
    /// Starts a turn whose identity depends on what came before (e.g. a turn counted by
    /// ordinal): the file must be read from its start.
    Unsafe(&'static str),
}

/// What makes a restart unsafe when it lies before the restart point: one of `needles`,
/// found by searching for `key`, a part of each of them. One search serves several
/// needles (the bytes before a restart point are searched for every key at once: that
/// search is most of what a tail-first read costs); a hit of the key only counts where a
/// whole needle stands around it.
///
/// Keys are three bytes that are rare in transcripts: the search fingerprints every key
/// by as many bytes as the shortest has, and costs about a third more per byte with four
/// than with three (`scan` on a generated tree); a common key would make every hit a
/// check.
#[derive(Debug, Clone, Copy)]
pub struct Hazard {
    /// Searched for.
    pub key: &'static [u8],
    /// The patterns themselves, each holding `key`; empty: `key` is the pattern.
    pub needles: &'static [&'static [u8]],
    /// The reason reported when the read falls back to the whole file.
    pub why: &'static str,
}

impl Hazard {
    /// `key` is the whole pattern.
    pub const fn plain(key: &'static [u8], why: &'static str) -> Self {
        Self {
            key,
            needles: &[],
            why,
        }
    }
}

/// One agent's restart rules: the needles and checks that come before its projector is
/// asked. The projector-driven parts ([`classify`], [`settles`], [`resets`]) are shared.
pub trait Restarts: Sync {
    /// Why the file at `path` has no restart points although the agent's files may.
    fn unsupported(&self, _path: &Path) -> Option<&'static str> {
        None
    }

    /// See [`hazards`].
    fn hazards(&self, path: &Path) -> &'static [Hazard];

    /// Whether the agent's records never name their turn after its start, so that
    /// [`settles`] may hold.
    fn may_settle(&self) -> bool {
        false
    }

    /// What every line that answers or asks holds (a cheap look before [`resets`] parses).
    fn answer_needle(&self) -> &'static Finder<'static>;

    /// A second cheap look before [`resets`] parses, past [`Restarts::answer_needle`]:
    /// false where the line cannot set the message (a line turned away only makes the
    /// read start earlier).
    fn may_reset(&self, _line: &[u8]) -> bool {
        true
    }

    /// See [`may_end_turn`].
    fn end_needles(&self) -> &'static AnyOf;

    /// See [`names_turn`].
    fn names_turn(&self, _line: &[u8]) -> Option<String> {
        None
    }

    /// See [`turn_needle`].
    fn turn_needle(&self, turn: &str) -> Vec<u8>;

    /// A verdict on a line from its bytes alone, before the projector is asked; `None`:
    /// ask it.
    fn before_parse(&self, line: &[u8]) -> Option<Restart>;

    /// Whether a line that starts no turn starts one only if the model answers it (so a
    /// read that skipped it would miss the turn).
    fn may_defer(&self, _line: &[u8]) -> bool {
        false
    }

    /// See [`sets_context`].
    fn sets_context(&self, _line: &[u8]) -> bool {
        false
    }

    /// See [`needs_context`].
    fn needs_context(&self, _line: &[u8]) -> bool {
        false
    }

    /// See [`context_hazard`].
    fn context_hazard(&self) -> Option<Hazard> {
        None
    }
}

fn rules(kind: ProviderKind) -> Option<&'static dyn Restarts> {
    kind.descriptor().restarts()
}

/// Why the file at `path` has no restart points at all (it is always read whole), if so.
pub fn unsupported(kind: ProviderKind, path: &Path) -> Option<&'static str> {
    match rules(kind) {
        Some(r) => r.unsupported(path),
        None => Some("provider"),
    }
}

/// Patterns whose presence anywhere before a restart point (after the file's first line,
/// which the restarted read is shown) means the skipped part holds context the restart
/// cannot recover, each with the reason reported when it falls back.
pub fn hazards(kind: ProviderKind, path: &Path) -> &'static [Hazard] {
    rules(kind).map_or(&[], |r| r.hazards(path))
}

/// The first observation of a fresh projector's reading of `line`, and the main
/// conversation's agent, or `None` if the line does not parse.
fn fresh(kind: ProviderKind, path: &Path, line: &[u8]) -> Option<(Option<String>, Vec<Obs>)> {
    let mut p = projector_for(kind, path);
    let main_agent = p.obs(String::new(), None, ObsKind::Work).agent;
    let mut out = Vec::new();
    p.project(super::strip_nul(line), &mut out).ok()?;
    Some((main_agent, out))
}

/// Whether the first observation reopens the main conversation's turn (where the
/// session started, which a fresh projector sends first, is context).
fn opens(main_agent: &Option<String>, out: &[Obs]) -> bool {
    let mut activity = out
        .iter()
        .filter(|o| !matches!(o.kind, ObsKind::StartDir(_) | ObsKind::Branch(_)));
    activity.next().is_some_and(|o| {
        o.agent == *main_agent
            && matches!(
                o.kind,
                ObsKind::Work
                    | ObsKind::ToolCall { .. }
                    | ObsKind::ToolResult { .. }
                    | ObsKind::Final { .. }
            )
    })
}

/// Whether, from this line on, a fresh reducer session ends up in the same state as one
/// that saw everything before, once the next turn starts: the line's first observation
/// (work, a tool call or result, an answer) reopens the turn and resets its pending
/// answer whatever came before, so only the open turn's id still differs, and that is
/// replaced at the next turn start. That holds only where no later record names its
/// turn (Claude's ends never do; Codex's `task_complete` does).
pub fn settles(kind: ProviderKind, path: &Path, line: &[u8]) -> bool {
    if !rules(kind).is_some_and(|r| r.may_settle()) {
        return false;
    }
    fresh(kind, path, line).is_some_and(|(main, out)| opens(&main, &out))
}

/// Whether this line decides the session's message and resets its open turn's pending
/// answer whatever came before, leaving only the open turn's identity to the past: its
/// first observation reopens the turn (as [`settles`]) and one of them sets the message
/// (an answer with text, or a question to the person). A read may jump from the last
/// turn start straight to such a line.
pub fn resets(kind: ProviderKind, path: &Path, line: &[u8]) -> bool {
    // Only assistant records answer or ask; the rest are turned away before parsing (a
    // line turned away only makes the read start earlier).
    let Some(r) = rules(kind) else { return false };
    if r.answer_needle().find(line).is_none() || !r.may_reset(line) {
        return false;
    }
    resets_parsed(kind, path, line)
}

/// [`resets`] by the parse alone, without the looks before it.
fn resets_parsed(kind: ProviderKind, path: &Path, line: &[u8]) -> bool {
    let Some((main_agent, out)) = fresh(kind, path, line) else {
        return false;
    };
    opens(&main_agent, &out)
        && out.iter().all(|o| o.agent == main_agent)
        && out.iter().any(|o| {
            matches!(
                &o.kind,
                ObsKind::Final {
                    message: Some(_),
                    ..
                } | ObsKind::ToolCall {
                    needs_input: Some(_),
                    ..
                }
            )
        })
}

/// Whether this line sets what the projector carries from line to line (Codex's
/// approval policy, from `turn_context`). A read that jumps over such a line shows it to
/// the projector first, as it shows the file's first line: without it, a later call that
/// asks to leave the sandbox would not be seen as a wait.
pub fn sets_context(kind: ProviderKind, line: &[u8]) -> bool {
    rules(kind).is_some_and(|r| r.sets_context(super::strip_nul(line)))
}

/// Whether this line may mean something else under another context (see
/// [`sets_context`]): a cheap look, so it may say yes where a parse would say no. Read
/// from a restart point with no line that sets the context between them, such a line
/// makes the part before the restart point searched for [`context_hazard`].
pub fn needs_context(kind: ProviderKind, line: &[u8]) -> bool {
    rules(kind).is_some_and(|r| r.needs_context(line))
}

/// What every line that sets the context holds, searched for before a restart point
/// when a line after it needs the context and nothing read sets it: found, the file is
/// read whole (the restarted projector would miss the context).
pub fn context_hazard(kind: ProviderKind) -> Option<Hazard> {
    rules(kind)?.context_hazard()
}

/// Whether this line may decide its turn (an end marker, an error, an interrupt): a cheap
/// look for the words, never a parse, so it may say yes where a parse would say no.
pub fn may_end_turn(kind: ProviderKind, line: &[u8]) -> bool {
    rules(kind).is_none_or(|r| r.end_needles().found(line))
}

/// The turn a record names, if it names one (an end that names another turn than the
/// open one can make that turn current).
pub fn names_turn(kind: ProviderKind, line: &[u8]) -> Option<String> {
    rules(kind)?.names_turn(line)
}

/// What a copy of the record that starts turn `turn` would contain: found before the
/// restart point, the turn may still be open there, and then its start is no new turn.
pub fn turn_needle(kind: ProviderKind, turn: &str) -> Vec<u8> {
    match rules(kind) {
        Some(r) => r.turn_needle(turn),
        None => turn.as_bytes().to_vec(),
    }
}

/// Needles built once, from a list (every line of a file's last turns passes the
/// restart checks).
pub(crate) fn finders(needles: &[&'static [u8]]) -> Vec<Finder<'static>> {
    needles.iter().map(|n| Finder::new(*n)).collect()
}

/// Where `needle` starts in `hay` if it stands whole around a hit of its key at `hit`
/// (the key sitting `at` bytes into the needle).
pub(crate) fn around(hay: &[u8], hit: usize, (needle, at): (&[u8], usize)) -> Option<usize> {
    let start = hit.checked_sub(at)?;
    (hay.get(start..start + needle.len()) == Some(needle)).then_some(start)
}

/// Words looked for by a short key: `key` lies in each of `needles`.
pub struct Word {
    pub key: &'static [u8],
    pub needles: &'static [&'static [u8]],
}

impl Word {
    pub const fn new(key: &'static [u8], needles: &'static [&'static [u8]]) -> Self {
        Self { key, needles }
    }
}

/// Several needles looked for in one pass (aho-corasick's packed searcher): every line
/// of a file's last turn is looked at for each of a dozen end words, and a pass per word
/// was a tenth of `scan`'s CPU. The pass looks for each word's three-byte key, and a hit
/// counts when a whole needle stands around it: the packed searcher fingerprints every
/// pattern by as many bytes as the shortest has, and four bytes (the needles' own
/// starts, `"sto` of every `stop_reason`) cost more per byte than three rare ones. Where
/// the packed searcher is not available (a CPU without SSSE3 or NEON), a pass per needle.
pub struct AnyOf {
    packed: Option<aho_corasick::packed::Searcher>,
    /// By the packed searcher's pattern (a word's key): each needle, and where the key
    /// sits in it.
    words: Vec<Vec<(&'static [u8], usize)>>,
    /// Needles looked for by a pass of their own: every needle without the packed
    /// searcher, else only one that does not hold its word's key (a slip in a list
    /// costs speed, never a needle).
    each: Vec<Finder<'static>>,
}

impl AnyOf {
    pub fn new(words: &[Word]) -> Self {
        let packed = aho_corasick::packed::Searcher::new(words.iter().map(|w| w.key));
        let mut words_at = Vec::with_capacity(words.len());
        let mut alone = Vec::new();
        for w in words {
            let mut at = Vec::new();
            for n in w.needles {
                match memchr::memmem::find(n, w.key) {
                    Some(i) if packed.is_some() => at.push((*n, i)),
                    _ => alone.push(*n),
                }
            }
            words_at.push(at);
        }
        Self {
            packed,
            words: words_at,
            each: finders(&alone),
        }
    }

    /// Whether any of the needles lies in `hay`.
    pub fn found(&self, hay: &[u8]) -> bool {
        if self.each.iter().any(|n| n.find(hay).is_some()) {
            return true;
        }
        let Some(p) = &self.packed else {
            return false;
        };
        let mut from = 0;
        while let Some(m) = p.find_in(hay, aho_corasick::Span::from(from..hay.len())) {
            let hit = m.start();
            let needles = self
                .words
                .get(m.pattern().as_usize())
                .map_or(&[][..], Vec::as_slice);
            if needles
                .iter()
                .any(|&(n, at)| around(hay, hit, (n, at)).is_some())
            {
                return true;
            }
            // Keys may overlap: the next try starts one byte on, not past the hit.
            from = hit + 1;
        }
        false
    }
}

/// Classifies one complete line (newline excluded) of a file of `kind` at `path`.
pub fn classify(kind: ProviderKind, path: &Path, line: &[u8]) -> Restart {
    let Some(r) = rules(kind) else {
        return Restart::No;
    };
    if let Some(verdict) = r.before_parse(line) {
        return verdict;
    }
    // The projector decides: a fresh one, so that nothing but this line counts.
    let Some((main_agent, out)) = fresh(kind, path, line) else {
        return Restart::No;
    };
    let mut starts = out.iter().filter_map(|o| match &o.kind {
        ObsKind::TurnStart { turn, .. } if o.agent == main_agent => Some(turn.clone()),
        _ => None,
    });
    // Where the session started (for liveness) is context, not activity.
    let activity = out
        .iter()
        .filter(|o| !matches!(o.kind, ObsKind::StartDir(_) | ObsKind::Branch(_)))
        .count();
    match (starts.next(), activity) {
        (Some(turn), 1) => Restart::At(turn),
        // A turn start that brings other news (a teammate's or a task's end): not a clean
        // restart point, and no read may jump over it.
        (Some(_), _) => Restart::Maybe,
        // A record that starts a turn only if the model answers it (a `<bash-input>`, a
        // teammate's idle notification): a read that skipped it would miss the turn.
        (None, _) if r.may_defer(line) => Restart::Maybe,
        _ => Restart::No,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn claude_prompt_is_a_restart_point_but_tool_results_and_sidechains_are_not() {
        let p = Path::new("/p/11111111-2222-4333-8444-555555555555.jsonl");
        let prompt = br#"{"type":"user","uuid":"u1","isSidechain":false,"message":{"role":"user","content":"hi"}}"#;
        assert_eq!(
            classify(ProviderKind::Claude, p, prompt),
            Restart::At("u1".into())
        );
        let result = br#"{"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]}}"#;
        assert_eq!(classify(ProviderKind::Claude, p, result), Restart::No);
        let side = br#"{"type":"user","uuid":"u3","isSidechain":true,"message":{"role":"user","content":"task"}}"#;
        assert_eq!(classify(ProviderKind::Claude, p, side), Restart::No);
    }

    /// Claude's look before the parse turns away no line the parse would take: not one
    /// of the corpus's lines, nor a question or an answer in any layout written here.
    #[test]
    fn claude_may_reset_keeps_every_line_that_resets() {
        let p = Path::new("/p/11111111-2222-4333-8444-555555555555.jsonl");
        let rules = rules(ProviderKind::Claude).unwrap();
        let call = |name: &str| {
            format!(
                r#"{{"type":"assistant","uuid":"a","message":{{"role":"assistant","content":[{{"type":"tool_use","id":"t","name":"{name}","input":{{"questions":[{{"question":"Go?"}}]}}}}],"stop_reason":"tool_use"}}}}"#
            )
        };
        let mut lines: Vec<(Vec<u8>, Option<bool>)> = vec![
            (call("AskUserQuestion").into_bytes(), Some(true)),
            (call("ExitPlanMode").into_bytes(), Some(true)),
            (call("Bash").into_bytes(), Some(false)),
            (
                br#"{"type":"assistant","uuid":"a","message":{"role":"assistant","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn"}}"#.to_vec(),
                Some(true),
            ),
            (
                br#"{"type":"assistant","uuid":"a","message":{"role":"assistant","content":"Done.","stop_reason":"end_turn"}}"#.to_vec(),
                Some(true),
            ),
        ];
        let corpus = crate::provider::corpus::corpus_files("claude");
        for f in &corpus {
            let bytes = std::fs::read(f).unwrap();
            lines.extend(bytes.split(|b| *b == b'\n').map(|l| (l.to_vec(), None)));
        }
        if corpus.is_empty() {
            println!("NOTICE: ../shared/corpus is absent; Claude corpus lines skipped.");
        }
        let (mut parsed, mut turned_away) = (0, 0);
        for (line, want) in &lines {
            let full = resets_parsed(ProviderKind::Claude, p, line);
            if let Some(w) = want {
                assert_eq!(full, *w, "{}", String::from_utf8_lossy(line));
            }
            assert!(
                !full || rules.may_reset(line),
                "{}",
                String::from_utf8_lossy(line)
            );
            assert_eq!(resets(ProviderKind::Claude, p, line), full);
            if rules.answer_needle().find(line).is_some() {
                parsed += 1;
                turned_away += usize::from(!rules.may_reset(line));
            }
        }
        println!("{turned_away} of {parsed} assistant lines turned away before a parse");
        // The look is worth having: the corpus's tool calls are turned away before a
        // parse.
        assert!(
            corpus.is_empty() || turned_away * 4 > parsed,
            "{turned_away} of {parsed}"
        );
    }

    #[test]
    fn codex_turn_needs_its_own_id() {
        let p =
            Path::new("/s/rollout-2026-01-01T00-00-00-019c0000-0000-7000-8000-000000000001.jsonl");
        let with = br#"{"type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}"#;
        assert_eq!(
            classify(ProviderKind::Codex, p, with),
            Restart::At("t1".into())
        );
        let without = br#"{"type":"event_msg","payload":{"type":"task_started"}}"#;
        assert_eq!(
            classify(ProviderKind::Codex, p, without),
            Restart::Unsafe("turn_ordinal")
        );
        let prompt = br#"{"type":"event_msg","payload":{"type":"user_message","message":"x"}}"#;
        assert_eq!(classify(ProviderKind::Codex, p, prompt), Restart::No);
        // The newer name, after another `_started"` in the same line.
        let turn = br#"{"type":"event_msg","payload":{"note":"mcp_started","type":"turn_started","turn_id":"t2"}}"#;
        assert_eq!(
            classify(ProviderKind::Codex, p, turn),
            Restart::At("t2".into())
        );
        let other = br#"{"type":"event_msg","payload":{"type":"mcp_started","turn_id":"t3"}}"#;
        assert_eq!(classify(ProviderKind::Codex, p, other), Restart::No);
    }

    #[test]
    fn any_of_finds_each_needle_anywhere_and_nothing_else() {
        const DURATION: Word = Word::new(b"n_d", &[b"\"turn_duration\""]);
        const INTERRUPTED: Word = Word::new(b"[Re", &[b"[Request interrupted"]);
        let any = AnyOf::new(&[DURATION, INTERRUPTED, Word::new(b"x", &[b"x"])]);
        for hay in [
            &b"x"[..],
            b"..\"turn_duration\"",
            b"\"turn_duration\"..",
            b"[Request interrupted by user]",
        ] {
            assert!(any.found(hay), "{}", String::from_utf8_lossy(hay));
        }
        let any = AnyOf::new(&[DURATION, INTERRUPTED]);
        for hay in [
            &b""[..],
            b"\"turn_duration",
            b"[Request interrupte",
            b"y",
            b"n_d [Re",
        ] {
            assert!(!any.found(hay), "{}", String::from_utf8_lossy(hay));
        }
        // A long line with the needle past the packed searcher's first block.
        let mut long = vec![b'.'; 10_000];
        long.extend_from_slice(b"[Request interrupted");
        assert!(any.found(&long));
        // Keys that overlap, and a key hit before the needle's own.
        let any = AnyOf::new(&[
            Word::new(b"abc", &[b"xabcx"]),
            Word::new(b"bca", &[b"abcab"]),
        ]);
        assert!(any.found(b"..abcab.."));
        assert!(any.found(b"abc xabcx"));
        assert!(!any.found(b"abca xabc"));
        // A needle without its word's key is still found.
        let any = AnyOf::new(&[Word::new(b"zzz", &[b"[Request interrupted"])]);
        assert!(any.found(b"..[Request interrupted by user]"));
        assert!(!any.found(b"..zzz.."));
    }

    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(b"\"stop_reason\":\"end_turn\"".to_vec()),
            Just(b"\"stop_reason\":\"tool_use\"".to_vec()),
            Just(b"\"stop_sequence\":null".to_vec()),
            Just(b"\"turn_duration\"".to_vec()),
            Just(b"_tu".to_vec()),
            Just(b"ce\"".to_vec()),
            Just(b"n_d".to_vec()),
            Just(b"\"".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..24),
        ]
    }

    proptest! {
        /// The keyed pass says what a pass per needle says, whatever surrounds the
        /// needles, their keys and pieces of them.
        #[test]
        fn any_of_agrees_with_a_pass_per_needle(
            pieces in proptest::collection::vec(piece(), 0..30),
        ) {
            const NEEDLES: [&[u8]; 3] = [
                b"\"stop_reason\":\"end_turn\"",
                b"\"stop_reason\":\"stop_sequence\"",
                b"\"turn_duration\"",
            ];
            let any = AnyOf::new(&[
                Word::new(b"_tu", &[NEEDLES[0]]),
                Word::new(b"ce\"", &[NEEDLES[1]]),
                Word::new(b"n_d", &[NEEDLES[2]]),
            ]);
            let hay = pieces.concat();
            let each = NEEDLES.iter().any(|n| memchr::memmem::find(&hay, n).is_some());
            prop_assert_eq!(any.found(&hay), each);
        }
    }
}
