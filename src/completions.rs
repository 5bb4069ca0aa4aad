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

/// Writes the man page (roff) of `baton`, or of its subcommand `sub` (`baton-scan(1)`).
/// `Ok(false)` when there is no such subcommand.
pub fn man(sub: Option<&str>, out: &mut impl Write) -> io::Result<bool> {
    let mut cmd = Cli::command();
    cmd.build();
    let page = match sub {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(c) if name != "help" => c.clone().version(env!("CARGO_PKG_VERSION")),
            _ => return Ok(false),
        },
    };
    clap_mangen::Man::new(page).render(out)?;
    out.flush()?;
    Ok(true)
}

/// The subcommands that have a man page, for error messages.
pub fn man_pages() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .filter(|n| n != "help")
        .collect()
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
        assert!(man(None, &mut out).expect("render"));
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.contains(".TH baton 1"));
        assert!(text.contains("completions"));
    }

    #[test]
    fn every_page_the_top_page_names_exists() {
        let mut top = Vec::new();
        man(None, &mut top).expect("render");
        let top = String::from_utf8(top).expect("utf-8");
        let pages = man_pages();
        assert!(pages.len() >= 9, "{pages:?}");
        for name in &pages {
            let mut out = Vec::new();
            assert!(man(Some(name), &mut out).expect("render"), "{name}");
            let text = String::from_utf8(out).expect("utf-8");
            assert!(text.contains(&format!(".TH baton-{name} 1")), "{text}");
        }
        // The top page's references are to those pages only.
        let mut named = 0;
        for (i, _) in top.match_indices("baton\\-") {
            named += 1;
            let rest = &top[i + "baton\\-".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            assert!(
                pages.contains(&name) || name == "help",
                "top page names baton-{name}"
            );
        }
        assert!(named >= pages.len(), "{top}");
        let mut out = Vec::new();
        assert!(!man(Some("nope"), &mut out).expect("render"));
    }
}
