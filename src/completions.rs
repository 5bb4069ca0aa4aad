//! `baton completions SHELL` and `baton man`: generated from the clap definitions, so they
//! cannot drift from the real flags.

use crate::cli::Cli;
use clap::CommandFactory;
use clap_complete::Shell;
use std::io::{self, Write};

/// Writes the completion script for `shell`.
pub fn completions(shell: Shell, out: &mut impl Write) -> io::Result<()> {
    let mut cmd = Cli::command();
    clap_complete::generate(shell, &mut cmd, "baton", out);
    out.flush()
}

/// Writes the man page (roff) for `baton` and its subcommands.
pub fn man(out: &mut impl Write) -> io::Result<()> {
    let cmd = Cli::command();
    clap_mangen::Man::new(cmd).render(out)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_gets_a_script_naming_the_subcommands() {
        for shell in [
            Shell::Bash,
            Shell::Zsh,
            Shell::Fish,
            Shell::Elvish,
            Shell::PowerShell,
        ] {
            let mut out = Vec::new();
            completions(shell, &mut out).expect("render");
            let text = String::from_utf8(out).expect("utf-8");
            for sub in ["replay", "scan", "unit", "completions"] {
                assert!(text.contains(sub), "{shell:?} completions lack {sub}");
            }
        }
    }

    #[test]
    fn man_page_is_roff_for_baton() {
        let mut out = Vec::new();
        man(&mut out).expect("render");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.contains(".TH baton 1"));
        assert!(text.contains("completions"));
    }
}
