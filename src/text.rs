//! Transcript text is untrusted: before it is shown anywhere (event `message`, `scan`,
//! `status`, desktop notes, webhook titles and bodies) it goes through this one
//! sanitizer, lazily, so a huge message costs only what is kept.
//!
//! What goes: every C0 and C1 control character (whitespace controls are passed on for
//! the caller to fold), whole escape sequences in both their 7-bit (`ESC x`) and 8-bit
//! (C1) forms, so no parameter bytes are left behind, bidirectional controls (which can
//! make a line display text in an order other than its own) and invisible characters.

/// Characters that display as nothing or reorder what follows: bidi embeddings,
/// overrides, isolates and marks, zero-width characters, invisible operators, the byte
/// order mark, the soft hyphen and interlinear annotation marks.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF9}'..='\u{FFFB}'
    )
}

/// True for a character that never reaches output: a control character (C0, DEL, C1)
/// or an invisible or reordering one.
pub fn is_hidden(c: char) -> bool {
    c.is_control() || is_invisible(c)
}

/// How a sequence that carries a string (OSC, DCS, SOS, PM, APC) ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StringEnd {
    /// OSC: BEL or ST.
    BelOrSt,
    /// The others: ST only (`ESC \` or the C1 ST).
    St,
}

/// Yields the printable characters of `chars`, with whitespace controls (`\n`, `\t`,
/// `\r`) kept for the caller to fold. Removed whole, in 7-bit and C1 form:
/// - CSI (`ESC [` / `U+009B`): parameter and intermediate bytes and the final byte;
/// - OSC (`ESC ]` / `U+009D`) to BEL or ST, and DCS, SOS, PM, APC
///   (`ESC P X ^ _` / `U+0090 98 9E 9F`) to ST;
/// - other escapes (`ESC ( B` charset designations, `ESC =`, `ESC 7`): intermediates
///   and one final byte.
///
/// An unterminated string sequence swallows the rest: better than showing what a
/// terminal would hide.
pub struct Printable<I: Iterator<Item = char>> {
    inner: std::iter::Peekable<I>,
}

impl<I: Iterator<Item = char>> Printable<I> {
    pub fn new(chars: I) -> Self {
        Printable {
            inner: chars.peekable(),
        }
    }

    /// After CSI: parameters and intermediates (0x20..=0x3F), then one final byte
    /// (0x40..=0x7E). Anything else ends the sequence and is read as text.
    fn skip_csi(&mut self) {
        while let Some(&n) = self.inner.peek() {
            match n {
                ' '..='?' => {
                    self.inner.next();
                }
                '@'..='~' => {
                    self.inner.next();
                    return;
                }
                _ => return,
            }
        }
    }

    /// After the opener of a string sequence: everything up to its terminator.
    fn skip_string(&mut self, end: StringEnd) {
        while let Some(n) = self.inner.next() {
            match n {
                '\u{7}' if end == StringEnd::BelOrSt => return,
                '\u{9c}' => return,
                '\u{1b}' if self.inner.peek() == Some(&'\\') => {
                    self.inner.next();
                    return;
                }
                _ => {}
            }
        }
    }

    /// After a lone `ESC`: the rest of the sequence it starts.
    fn skip_escape(&mut self) {
        match self.inner.peek().copied() {
            Some('[') => {
                self.inner.next();
                self.skip_csi();
            }
            Some(']') => {
                self.inner.next();
                self.skip_string(StringEnd::BelOrSt);
            }
            Some('P' | 'X' | '^' | '_') => {
                self.inner.next();
                self.skip_string(StringEnd::St);
            }
            Some(' '..='/') => {
                // Intermediates (charset designations `ESC ( B`, `ESC $ ) A`), then a
                // final byte.
                while let Some(' '..='/') = self.inner.peek() {
                    self.inner.next();
                }
                if let Some('0'..='~') = self.inner.peek() {
                    self.inner.next();
                }
            }
            Some('0'..='~') => {
                self.inner.next();
            }
            // Not a sequence: the next character is read as text.
            _ => {}
        }
    }
}

impl<I: Iterator<Item = char>> Iterator for Printable<I> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        loop {
            let c = self.inner.next()?;
            match c {
                '\u{1b}' => self.skip_escape(),
                '\u{9b}' => self.skip_csi(),
                '\u{9d}' => self.skip_string(StringEnd::BelOrSt),
                '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => self.skip_string(StringEnd::St),
                '\t' | '\n' | '\r' => return Some(c),
                c if is_hidden(c) => {}
                c => return Some(c),
            }
        }
    }
}

/// `s` without terminal escapes, control characters (whitespace controls included) or
/// invisible characters.
pub fn strip_terminal(s: &str) -> String {
    if s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        // Printable ASCII has no escape, control or invisible character: the common
        // case, without walking it char by char (a `status` row takes several).
        return s.to_owned();
    }
    Printable::new(s.chars())
        .filter(|c| !c.is_control())
        .collect()
}

/// `s` as one printable line: escapes and controls stripped as [`strip_terminal`] does,
/// but line breaks and tabs turned into spaces first (or "done\nnow" reads "donenow"),
/// and every run of whitespace one space.
pub fn one_line(s: &str) -> String {
    let spaced: String = Printable::new(s.chars())
        .map(|c| {
            if matches!(c, '\n' | '\r' | '\t') {
                ' '
            } else {
                c
            }
        })
        .filter(|c| !c.is_control())
        .collect();
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `max` characters, ending in `…` when cut.
pub fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    if max == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// Longest directory name shown for a project.
const DIR_NAME_MAX: usize = 40;

/// A project's name from the directory its session started in: the last `components`
/// path components (`/home/me/src/my-web-app` → `my-web-app`, or `src/my-web-app` for
/// 2), made printable and capped. `None` when nothing printable is left.
pub fn dir_name(dir: &str, components: usize) -> Option<String> {
    let want = components.max(1);
    // From the end: only the components shown are made printable.
    let mut parts: Vec<String> = Vec::with_capacity(want);
    for p in dir.rsplit(['/', '\\']) {
        if parts.len() == want {
            break;
        }
        let p = strip_terminal(p);
        let p = p.trim();
        if !p.is_empty() {
            parts.push(p.to_owned());
        }
    }
    parts.reverse();
    let name = parts.join("/");
    if name.is_empty() {
        return None;
    }
    if name.chars().count() <= DIR_NAME_MAX {
        return Some(name);
    }
    let mut cut: String = name.chars().take(DIR_NAME_MAX - 1).collect();
    cut.push('…');
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn strips_escapes() {
        assert_eq!(strip_terminal("a\u{1b}[31mred\u{1b}[0m b"), "ared b");
        assert_eq!(strip_terminal("x\u{1b}]0;title\u{7}y"), "xy");
        assert_eq!(strip_terminal("x\u{1b}]8;;http://e\u{1b}\\y"), "xy");
        assert_eq!(strip_terminal("bell\u{7}\u{9b}"), "bell");
        assert_eq!(strip_terminal("tab\tnl\n"), "tabnl");
    }

    #[test]
    fn one_line_keeps_words_apart() {
        assert_eq!(
            one_line("done\nnow\r\n\tthen \u{1b}[31mred\u{1b}[0m  x\n"),
            "done now then red x"
        );
        assert_eq!(cut(&one_line("a\nbcd"), 4), "a b…");
    }

    #[test]
    fn dir_names() {
        assert_eq!(
            dir_name("/home/me/src/my-web-app", 1).as_deref(),
            Some("my-web-app")
        );
        assert_eq!(
            dir_name("/home/me/src/my-web-app/", 2).as_deref(),
            Some("src/my-web-app")
        );
        assert_eq!(dir_name("C:\\Users\\me\\api", 1).as_deref(), Some("api"));
        assert_eq!(dir_name("/x/a\u{1b}[31mb", 1).as_deref(), Some("ab"));
        assert_eq!(dir_name("/", 1), None);
        assert_eq!(dir_name("/a", 2).as_deref(), Some("a"));
    }

    #[test]
    fn strips_c1_sequences_with_their_parameters() {
        assert_eq!(strip_terminal("a\u{9b}31mred\u{9b}0m"), "ared");
        assert_eq!(strip_terminal("a\u{9b}?25lb"), "ab");
        assert_eq!(strip_terminal("a\u{9d}0;title\u{7}b"), "ab");
        assert_eq!(strip_terminal("a\u{9d}0;title\u{9c}b"), "ab");
        assert_eq!(strip_terminal("a\u{90}1$r0m\u{9c}b"), "ab");
        assert_eq!(strip_terminal("a\u{85}b"), "ab", "NEL is a C1 control");
    }

    #[test]
    fn strips_dcs_charset_and_other_escapes() {
        assert_eq!(strip_terminal("a\u{1b}P1$r0m\u{1b}\\b"), "ab");
        assert_eq!(strip_terminal("a\u{1b}_apc\u{1b}\\b"), "ab");
        assert_eq!(strip_terminal("a\u{1b}(Bb"), "ab");
        assert_eq!(strip_terminal("a\u{1b}$)Ab"), "ab");
        assert_eq!(strip_terminal("a\u{1b}7b\u{1b}8"), "ab");
        assert_eq!(strip_terminal("a\u{1b}=b"), "ab");
        // A CSI cut short by text leaves the text.
        assert_eq!(strip_terminal("a\u{1b}[12\u{e9}t\u{e9}"), "a\u{e9}t\u{e9}");
    }

    #[test]
    fn strips_bidi_and_invisible_characters() {
        // With U+202E before "fdp.exe", "invoice_" + "fdp.exe" displays as "invoice_exe.pdf".
        assert_eq!(strip_terminal("invoice_\u{202e}fdp.exe"), "invoice_fdp.exe");
        assert_eq!(
            strip_terminal("a\u{200b}b\u{200c}c\u{200d}d\u{2060}e\u{feff}"),
            "abcde"
        );
        assert_eq!(
            strip_terminal("\u{2066}x\u{2069}\u{061c}\u{200e}\u{200f}"),
            "x"
        );
        assert_eq!(strip_terminal("\u{202a}\u{202b}\u{202c}\u{202d}y"), "y");
    }

    #[test]
    fn keeps_ordinary_text() {
        let s = "Fertig — 完成しました ✅ naïve café 🎉 עברית عربي";
        assert_eq!(strip_terminal(s), s);
        let kept: String = Printable::new("a\tb\nc\rd".chars()).collect();
        assert_eq!(kept, "a\tb\nc\rd", "whitespace is left to the caller");
    }

    fn hostile() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("\u{1b}".to_owned()),
            Just("\u{9b}".to_owned()),
            Just("\u{9d}".to_owned()),
            Just("\u{90}".to_owned()),
            Just("\u{1b}[".to_owned()),
            Just("\u{1b}]".to_owned()),
            Just("\u{1b}(".to_owned()),
            Just("\u{1b}\\".to_owned()),
            Just("\u{7}".to_owned()),
            Just("\u{9c}".to_owned()),
            Just("\u{202e}".to_owned()),
            Just("\u{2066}".to_owned()),
            Just("\u{200b}".to_owned()),
            Just("\u{feff}".to_owned()),
            "[0-9;?mABH ]{0,4}",
            any::<char>().prop_map(String::from),
            "\\PC{0,6}",
        ];
        proptest::collection::vec(piece, 0..24).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn output_never_holds_a_hidden_character(s in hostile()) {
            let out = strip_terminal(&s);
            prop_assert!(out.chars().all(|c| !is_hidden(c)), "{:?} -> {:?}", s, out);
            let kept: String = Printable::new(s.chars()).collect();
            prop_assert!(
                kept.chars().all(|c| matches!(c, '\t' | '\n' | '\r') || !is_hidden(c)),
                "{:?} -> {:?}", s, kept
            );
            let msg = crate::model::clip_message(&s).unwrap_or_default();
            prop_assert!(msg.chars().all(|c| !is_hidden(c)), "{:?} -> {:?}", s, msg);
        }

        #[test]
        fn plain_text_is_untouched(s in "[a-zA-Z0-9 .,!?éü完😀-]{0,40}") {
            prop_assert_eq!(strip_terminal(&s), s);
        }
    }
}
