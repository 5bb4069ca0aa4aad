//! The fast path for the records that make up most of a rollout's bytes and never decide
//! a turn on their own: `token_count` (every few seconds, with its rate-limit windows),
//! `turn_context` (the whole configuration, again at each turn), `agent_message` (a copy
//! of the answer), the person's and the developer's message items, reasoning, tool calls
//! and their output.
//!
//! Such a line is read by [`Scan`], a JSON checker that keeps only the few fields that
//! decide what the record means and steps over the rest without decoding or copying it.
//! It takes a line only if the full parse would take it too and read the same values from
//! it: anything it is not sure of (an escape in a field it reads or in a key near the
//! top, a field of another type than the full parse expects, a duplicate field, a number
//! the full parse may refuse, deep nesting, bad UTF-8, broken JSON) sends the line to the
//! full parse, which handles and reports it as it always did. The decision is made on
//! the fields found, wherever they are and however they are spaced: the byte test in
//! front, [`looks_plain`], only spares the scan for lines that need the full parse
//! anyway.

/// What a plain record means.
#[derive(Debug, PartialEq)]
pub(super) enum Plain {
    /// Nothing: no observation, no change to the projector.
    Quiet,
    /// The agent is working.
    Work,
    /// A tool call went out, to a tool that does not wait for the person.
    Call(String),
    /// A tool call came back.
    ToolResult(String),
    /// A `turn_context`, with its `approval_policy` when that is a plain string.
    Context(Option<String>),
}

/// Byte layouts Codex writes for the plain records, after
/// `{"timestamp":"…","type":"`. A hint only: [`plain`] decides on the fields it finds.
const LAYOUTS: [&[u8]; 13] = [
    b"turn_context\"",
    b"event_msg\",\"payload\":{\"type\":\"token_count\"",
    b"event_msg\",\"payload\":{\"type\":\"agent_message\"",
    b"event_msg\",\"payload\":{\"type\":\"agent_reasoning\"",
    b"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"user\"",
    b"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"developer\"",
    b"response_item\",\"payload\":{\"type\":\"reasoning\"",
    b"response_item\",\"payload\":{\"type\":\"function_call\"",
    b"response_item\",\"payload\":{\"type\":\"custom_tool_call\"",
    b"response_item\",\"payload\":{\"type\":\"local_shell_call\"",
    b"response_item\",\"payload\":{\"type\":\"function_call_output\"",
    b"response_item\",\"payload\":{\"type\":\"custom_tool_call_output\"",
    b"response_item\",\"payload\":{\"type\":\"local_shell_call_output\"",
];

/// Whether the line starts the way Codex writes one of the plain records: then scanning
/// it with [`plain`] first is worth it.
pub(super) fn looks_plain(line: &[u8]) -> bool {
    let Some(rest) = line.strip_prefix(b"{\"timestamp\":\"") else {
        return false;
    };
    let Some(end) = memchr::memchr2(b'"', b'\\', rest) else {
        return false;
    };
    let Some(rest) = rest[end..].strip_prefix(b"\",\"type\":\"") else {
        return false;
    };
    LAYOUTS.iter().any(|l| rest.starts_with(l))
}

/// The record's timestamp (as written) and meaning, if it is one of the plain records;
/// `None` sends it to the full parse. Only for a projector that is not inside a forked
/// child's copy of its parent's history, where every record's time counts. With
/// `escalations` (the session's approval policy asks the person), a call to a tool that
/// may ask for escalation goes to the full parse, which reads its arguments.
pub(super) fn plain(line: &[u8], escalations: bool) -> Option<(Option<&str>, Plain)> {
    // The scan checks no UTF-8: a line with bad UTF-8 anywhere goes to the full parse,
    // which repairs it and says so.
    if !line.is_ascii() {
        std::str::from_utf8(line).ok()?;
    }
    let mut scan = Scan {
        s: line,
        i: 0,
        f: Fields::default(),
    };
    scan.ws();
    if scan.peek()? != b'{' {
        return None;
    }
    scan.value(At::Top, 0)?;
    scan.ws();
    if scan.i != line.len() {
        return None;
    }
    let f = scan.f;
    if !f.payload {
        return None;
    }
    let what = match (f.ty?, f.payload_ty) {
        ("turn_context", _) => Plain::Context(f.approval_policy.map(str::to_owned)),
        ("event_msg", Some("agent_message" | "context_compacted")) => Plain::Quiet,
        // A `rate_limit_reached_type` other than null sent the line to the full parse.
        ("event_msg", Some("token_count")) => Plain::Quiet,
        ("event_msg", Some("agent_reasoning" | "stream_error")) => Plain::Work,
        ("response_item", Some("message")) if f.role != Some("assistant") => Plain::Quiet,
        ("response_item", Some(t)) if super::WORK_ITEMS.contains(&t) => Plain::Work,
        ("response_item", Some("function_call" | "custom_tool_call" | "local_shell_call"))
            if f.name != Some(super::ASK_TOOL)
                && !(escalations && f.name.is_some_and(|n| super::ESCALATING.contains(&n))) =>
        {
            Plain::Call(f.call_id.unwrap_or_default().to_owned())
        }
        (
            "response_item",
            Some("function_call_output" | "custom_tool_call_output" | "local_shell_call_output"),
        ) => Plain::ToolResult(f.call_id.unwrap_or_default().to_owned()),
        _ => return None,
    };
    Some((f.timestamp, what))
}

/// Where in the record the scan is: the objects whose fields the full parse reads.
#[derive(Clone, Copy, PartialEq)]
enum At {
    Top,
    Payload,
    Limits,
    Window,
    /// An item of `payload.content`.
    Item,
    /// `payload.error`.
    Error,
    /// Anything the full parse skips.
    Free,
    /// Inside a field the full parse reads as any value, which decodes its numbers.
    Any,
}

/// How the full parse reads a field, which is how much the scan must check.
#[derive(Clone, Copy)]
enum Kind {
    /// Read here: a string with no escape, or null.
    Read,
    /// A string (escapes allowed) or null.
    Str,
    /// Takes any value.
    Any,
    /// An object of its own kind, or null.
    Obj(At),
    /// `payload.content`: a string, or a list of items, or anything but a list.
    Content,
    /// A number that fits an `f64` (no exponent, to be sure), or null.
    Float,
    /// A whole number that fits an `i64`, or null.
    Int,
    /// Present and not null sends the line to the full parse.
    Absent,
}

/// The fields of each object the full parse reads, and how: the field's number (for
/// spotting one given twice) and kind. A key not listed is skipped by the full parse too.
fn field(at: At, key: &[u8]) -> Option<(u32, Kind)> {
    Some(match (at, key) {
        (At::Top, b"timestamp") => (0, Kind::Read),
        (At::Top, b"type") => (1, Kind::Read),
        (At::Top, b"payload") => (2, Kind::Obj(At::Payload)),
        (At::Top, b"id") => (3, Kind::Str),
        (At::Payload, b"type") => (0, Kind::Read),
        (At::Payload, b"role") => (1, Kind::Read),
        (At::Payload, b"call_id") => (2, Kind::Read),
        (At::Payload, b"name") => (3, Kind::Read),
        (At::Payload, b"rate_limits") => (4, Kind::Obj(At::Limits)),
        (At::Payload, b"id") => (5, Kind::Str),
        (At::Payload, b"parent_thread_id") => (6, Kind::Str),
        (At::Payload, b"turn_id") => (7, Kind::Str),
        (At::Payload, b"last_agent_message") => (8, Kind::Str),
        (At::Payload, b"reason") => (9, Kind::Str),
        (At::Payload, b"phase") => (10, Kind::Str),
        (At::Payload, b"arguments") => (11, Kind::Str),
        (At::Payload, b"forked_from_id") => (12, Kind::Str),
        (At::Payload, b"source") => (13, Kind::Any),
        (At::Payload, b"message") => (14, Kind::Any),
        (At::Payload, b"codex_error_info") => (15, Kind::Any),
        (At::Payload, b"error") => (16, Kind::Obj(At::Error)),
        (At::Payload, b"content") => (17, Kind::Content),
        // Tag: a string here; an object (a granular policy) goes to the full parse.
        (At::Payload, b"approval_policy") => (18, Kind::Read),
        (At::Limits, b"rate_limit_reached_type") => (0, Kind::Absent),
        (At::Limits, b"primary") => (1, Kind::Obj(At::Window)),
        (At::Limits, b"secondary") => (2, Kind::Obj(At::Window)),
        (At::Window, b"used_percent") => (0, Kind::Float),
        (At::Window, b"resets_at") => (1, Kind::Int),
        (At::Item, b"text") => (0, Kind::Str),
        (At::Error, b"message") => (0, Kind::Str),
        (At::Error, b"codex_error_info") => (1, Kind::Any),
        _ => return None,
    })
}

/// The fields read, as written (no escapes).
#[derive(Default)]
struct Fields<'a> {
    timestamp: Option<&'a str>,
    ty: Option<&'a str>,
    payload: bool,
    payload_ty: Option<&'a str>,
    role: Option<&'a str>,
    call_id: Option<&'a str>,
    name: Option<&'a str>,
    approval_policy: Option<&'a str>,
}

/// The JSON nesting the scan follows; serde_json refuses deeper than 128.
const MAX_DEPTH: usize = 100;

struct Scan<'a> {
    s: &'a [u8],
    i: usize,
    f: Fields<'a>,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// JSON whitespace, as serde_json takes it.
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.peek()? == b).then(|| self.i += 1)
    }

    /// One value; `at` is the object kind it is, if it is an object.
    fn value(&mut self, at: At, depth: usize) -> Option<()> {
        self.ws();
        let inner = if at == At::Any { At::Any } else { At::Free };
        match self.peek()? {
            b'{' => self.object(at, depth + 1),
            b'[' => self.array(inner, depth + 1),
            b'"' => self.string().map(drop),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            _ => {
                let (n, real) = self.number()?;
                // A decoded number must fit an f64: short and without exponent always
                // does.
                (at != At::Any
                    || (!real || !n.contains(&b'e') && !n.contains(&b'E')) && n.len() <= 30)
                    .then_some(())
            }
        }
    }

    fn word(&mut self, w: &[u8]) -> Option<()> {
        self.s[self.i..].starts_with(w).then(|| self.i += w.len())
    }

    fn object(&mut self, at: At, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        // One bit per listed field: the full parse refuses a field given twice.
        let mut seen = 0u32;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            self.ws();
            if self.peek()? != b'"' {
                return None;
            }
            let (key, escaped) = self.string()?;
            self.eat(b':')?;
            if matches!(at, At::Free | At::Any) {
                self.value(at, depth)?;
            } else {
                // An escaped key could spell a field's name.
                if escaped {
                    return None;
                }
                match field(at, key) {
                    Some((n, kind)) => {
                        if seen & (1 << n) != 0 {
                            return None;
                        }
                        seen |= 1 << n;
                        self.field(at, key, kind, depth)?;
                    }
                    None => self.value(At::Free, depth)?,
                }
            }
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, item: At, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            if matches!(item, At::Free | At::Any) {
                self.value(item, depth)?;
            } else {
                // Items of a known kind must be objects (the full parse would also take
                // a list in field order: the full parse may have those).
                self.ws();
                if self.peek()? != b'{' {
                    return None;
                }
                self.object(item, depth + 1)?;
            }
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A field the full parse reads, checked as it would check it.
    fn field(&mut self, at: At, key: &[u8], kind: Kind, depth: usize) -> Option<()> {
        self.ws();
        let first = self.peek()?;
        if first == b'n' {
            // null: the full parse takes it as absent, for every listed field.
            return self.word(b"null");
        }
        match kind {
            Kind::Read => {
                if first != b'"' {
                    return None;
                }
                let (v, escaped) = self.string()?;
                if escaped {
                    return None;
                }
                let v = std::str::from_utf8(v).ok()?;
                let slot = match (at, key) {
                    (At::Top, b"timestamp") => &mut self.f.timestamp,
                    (At::Top, b"type") => &mut self.f.ty,
                    (At::Payload, b"type") => &mut self.f.payload_ty,
                    (At::Payload, b"role") => &mut self.f.role,
                    (At::Payload, b"call_id") => &mut self.f.call_id,
                    (At::Payload, b"name") => &mut self.f.name,
                    (At::Payload, b"approval_policy") => &mut self.f.approval_policy,
                    _ => return None,
                };
                *slot = Some(v);
                Some(())
            }
            Kind::Str => {
                if first != b'"' {
                    return None;
                }
                self.string().map(drop)
            }
            Kind::Any => self.value(At::Any, depth),
            Kind::Obj(inner) => {
                if first != b'{' {
                    return None;
                }
                if inner == At::Payload {
                    self.f.payload = true;
                }
                self.object(inner, depth + 1)
            }
            Kind::Content => match first {
                b'[' => self.array(At::Item, depth + 1),
                // Read as any value: a number is decoded.
                _ => self.value(At::Any, depth),
            },
            Kind::Float => {
                let (n, _) = self.number()?;
                (n.len() <= 30 && !n.contains(&b'e') && !n.contains(&b'E')).then_some(())
            }
            Kind::Int => {
                // Not negative: serde_json reads `-0` as a float, which no i64 takes.
                // Up to 18 digits always fit.
                let (n, _) = self.number()?;
                (n.len() <= 18 && n.iter().all(u8::is_ascii_digit)).then_some(())
            }
            Kind::Absent => None,
        }
    }

    /// A string at its opening quote: its bytes as written, and whether it holds
    /// escapes. Control characters, bad escapes and UTF-16 surrogates (which the full
    /// parse may refuse) fail.
    fn string(&mut self) -> Option<(&'a [u8], bool)> {
        let start = self.i + 1;
        let mut j = start;
        let mut escaped = false;
        loop {
            j += plain_run(&self.s[j..]);
            match *self.s.get(j)? {
                b'"' => {
                    self.i = j + 1;
                    return Some((&self.s[start..j], escaped));
                }
                b'\\' => {
                    escaped = true;
                    match *self.s.get(j + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => j += 2,
                        b'u' => {
                            let hex = std::str::from_utf8(self.s.get(j + 2..j + 6)?).ok()?;
                            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                                return None;
                            }
                            let unit = u16::from_str_radix(hex, 16).ok()?;
                            if (0xD800..0xE000).contains(&unit) {
                                return None;
                            }
                            j += 6;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    /// A number by JSON's grammar: its bytes, and whether it has a fraction or exponent.
    fn number(&mut self) -> Option<(&'a [u8], bool)> {
        let start = self.i;
        let digits = |sc: &mut Self| {
            let from = sc.i;
            while sc.peek().is_some_and(|b| b.is_ascii_digit()) {
                sc.i += 1;
            }
            sc.i > from
        };
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                digits(self);
            }
            _ => return None,
        }
        let mut real = false;
        if self.peek() == Some(b'.') {
            self.i += 1;
            real = true;
            if !digits(self) {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            real = true;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !digits(self) {
                return None;
            }
        }
        Some((&self.s[start..self.i], real))
    }
}

/// How many bytes at the start of `s` need no look inside a string: neither a quote, a
/// backslash nor a control character. Eight at a time, as serde_json does.
pub(super) fn plain_run(s: &[u8]) -> usize {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    let zero_in = |w: u64| w.wrapping_sub(ONES) & !w & HIGH != 0;
    let mut n = 0;
    for chunk in s.chunks_exact(8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        let w = u64::from_ne_bytes(w);
        let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH != 0;
        if control
            || zero_in(w ^ (ONES * u64::from(b'"')))
            || zero_in(w ^ (ONES * u64::from(b'\\')))
        {
            break;
        }
        n += 8;
    }
    n + s[n..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .unwrap_or(s.len() - n)
}
