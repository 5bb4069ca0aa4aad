//! Transcript text is untrusted: before it is shown anywhere, terminal escape sequences
//! and control characters go, lazily, so a huge message costs only what is kept.

/// Yields the printable characters of `chars`: ANSI CSI (`ESC [ … final`), OSC
/// (`ESC ] … BEL` or `ESC ] … ESC \`), other two-byte `ESC x` sequences, C0 controls
/// other than whitespace, and C1 controls are dropped. Whitespace controls (`\n`, `\t`)
/// are kept for the caller to fold.
pub struct Printable<I: Iterator<Item = char>> {
    inner: std::iter::Peekable<I>,
}

impl<I: Iterator<Item = char>> Printable<I> {
    pub fn new(chars: I) -> Self {
        Printable {
            inner: chars.peekable(),
        }
    }
}

impl<I: Iterator<Item = char>> Iterator for Printable<I> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        loop {
            let c = self.inner.next()?;
            if c == '\u{1b}' {
                match self.inner.next() {
                    Some('[') => {
                        // Parameters and intermediates, then one final byte in @..~.
                        for n in self.inner.by_ref() {
                            if ('@'..='~').contains(&n) {
                                break;
                            }
                        }
                    }
                    Some(']') => {
                        while let Some(n) = self.inner.next() {
                            if n == '\u{7}' {
                                break;
                            }
                            if n == '\u{1b}' && self.inner.peek() == Some(&'\\') {
                                self.inner.next();
                                break;
                            }
                        }
                    }
                    _ => {}
                }
                continue;
            }
            if c.is_whitespace() || !(c.is_control() || ('\u{80}'..='\u{9f}').contains(&c)) {
                return Some(c);
            }
        }
    }
}

/// `s` without terminal escapes or control characters (whitespace kept).
pub fn strip_terminal(s: &str) -> String {
    Printable::new(s.chars())
        .filter(|c| !c.is_control() || *c == ' ')
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_escapes() {
        assert_eq!(strip_terminal("a\u{1b}[31mred\u{1b}[0m b"), "ared b");
        assert_eq!(strip_terminal("x\u{1b}]0;title\u{7}y"), "xy");
        assert_eq!(strip_terminal("x\u{1b}]8;;http://e\u{1b}\\y"), "xy");
        assert_eq!(strip_terminal("bell\u{7}\u{9b}"), "bell");
        assert_eq!(strip_terminal("tab\tnl\n"), "tabnl");
    }
}
