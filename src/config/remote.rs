//! `[[remote]]` sections: validated into [`RemoteConfig`]s.

use super::raw::RawRemote;
use crate::remote::{RemoteConfig, Source};

/// Checks every `[[remote]]`: a unique, plain name and exactly one of `ssh`/`command`.
pub(super) fn parse(raw: Vec<RawRemote>) -> Result<Vec<RemoteConfig>, (String, String)> {
    let mut out: Vec<RemoteConfig> = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let key = |k: &str| format!("remote[{i}].{k}");
        // The name becomes a file name in the state directory and `BATON_REMOTE`.
        if r.name.is_empty()
            || !r
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err((
                key("name"),
                format!(
                    "`{}` must be non-empty and only letters, digits, `.`, `_` or `-`",
                    r.name
                ),
            ));
        }
        if out.iter().any(|o| o.name == r.name) {
            return Err((key("name"), format!("`{}` names two remotes", r.name)));
        }
        let source = match (r.ssh, r.command) {
            (Some(dest), None) => {
                if dest.is_empty() || dest.starts_with('-') {
                    return Err((
                        key("ssh"),
                        format!("`{dest}` is not an ssh destination (user@host or a Host alias)"),
                    ));
                }
                let program = r.remote_baton.unwrap_or_else(|| "baton".to_owned());
                // The remote's shell reads it: a plain path only.
                if program.is_empty()
                    || !program
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "/._~+-".contains(c))
                {
                    return Err((
                        key("remote_baton"),
                        format!("`{program}` must be a plain path (no spaces or quotes)"),
                    ));
                }
                Source::Ssh {
                    dest,
                    options: r.ssh_options.unwrap_or_default(),
                    program,
                }
            }
            (None, Some(argv)) => {
                if let Some(k) = [
                    ("ssh_options", r.ssh_options.is_some()),
                    ("remote_baton", r.remote_baton.is_some()),
                ]
                .into_iter()
                .find_map(|(k, set)| set.then_some(k))
                {
                    return Err((key(k), "goes with `ssh`, not `command`".to_owned()));
                }
                if argv.first().is_none_or(String::is_empty) {
                    return Err((key("command"), "names no program".to_owned()));
                }
                Source::Command(argv)
            }
            _ => {
                return Err((
                    key("ssh"),
                    "give exactly one of `ssh = \"host\"` or `command = [...]`".to_owned(),
                ));
            }
        };
        out.push(RemoteConfig {
            name: r.name,
            source,
        });
    }
    Ok(out)
}

/// `baton config`'s `[[remote]]` sections, as they were given (or a comment saying how,
/// when there are none).
pub(super) fn write(o: &mut String, remotes: &[RemoteConfig]) {
    use crate::sink::section::{toml_list, toml_str};
    use std::fmt::Write as _;
    if remotes.is_empty() {
        o.push_str(
            "# Remotes (none): [[remote]] with name and ssh (plus ssh_options, remote_baton) or\n\
             # command, to take another machine's events in.\n",
        );
        return;
    }
    for r in remotes {
        let _ = writeln!(
            o,
            "# Another machine's events, shown as project@name.\n[[remote]]\nname = {}",
            toml_str(&r.name)
        );
        match &r.source {
            Source::Ssh {
                dest,
                options,
                program,
            } => {
                let _ = writeln!(
                    o,
                    "# Runs `ssh [ssh_options] DEST remote_baton tail --json --follow` (the host key must be known).\n\
                     ssh = {}\n\
                     ssh_options = {}\n\
                     remote_baton = {}\n",
                    toml_str(dest),
                    toml_list(options),
                    toml_str(program)
                );
            }
            Source::Command(argv) => {
                let _ = writeln!(
                    o,
                    "# Runs this program (no shell); it prints the event stream.\ncommand = {}\n",
                    toml_list(argv)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::config::Config;
    use crate::remote::Source;
    use std::path::Path;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(text, Path::new("c.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn remotes_are_validated() {
        let c = parse(
            "[[remote]]\nname = \"devbox\"\nssh = \"devbox\"\n\
             [[remote]]\nname = \"box.1_a-b\"\ncommand = [\"docker\", \"exec\", \"box\"]\n",
        )
        .unwrap();
        assert_eq!(c.remotes.len(), 2);
        assert!(
            matches!(&c.remotes[0].source, Source::Ssh { dest, program, .. }
            if dest == "devbox" && program == "baton")
        );
        let bad = [
            ("[[remote]]\nname = \"\"\nssh = \"h\"\n", "remote[0].name"),
            (
                "[[remote]]\nname = \"a b\"\nssh = \"h\"\n",
                "remote[0].name",
            ),
            (
                "[[remote]]\nname = \"a\"\nssh = \"h\"\n[[remote]]\nname = \"a\"\nssh = \"g\"\n",
                "names two remotes",
            ),
            ("[[remote]]\nname = \"a\"\n", "exactly one"),
            (
                "[[remote]]\nname = \"a\"\nssh = \"h\"\ncommand = [\"x\"]\n",
                "exactly one",
            ),
            (
                "[[remote]]\nname = \"a\"\ncommand = []\n",
                "names no program",
            ),
            (
                "[[remote]]\nname = \"a\"\nssh = \"-oProxyCommand=x\"\n",
                "remote[0].ssh",
            ),
            (
                "[[remote]]\nname = \"a\"\ncommand = [\"x\"]\nssh_options = [\"-p\", \"2\"]\n",
                "goes with `ssh`",
            ),
            (
                "[[remote]]\nname = \"a\"\nssh = \"h\"\nremote_baton = \"b; rm -rf /\"\n",
                "plain path",
            ),
            (
                "[[remote]]\nname = \"a\"\nssh = \"h\"\nport = 2\n",
                "unknown field",
            ),
        ];
        for (text, want) in bad {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
