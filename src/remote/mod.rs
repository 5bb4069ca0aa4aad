//! `[[remote]]`: another machine's baton, followed over `ssh` (or any command that prints
//! its `baton tail --json --follow` stream). No listener and no protocol of our own: the
//! child's stdout is the stream.
//!
//! One thread per remote ([`link`]) runs the child in its own process group, reads its
//! lines (bounded), and hands each transcript event on, marked with the remote's name,
//! to the same queue the core's events take to the sinks. The last id handed on is saved
//! in the state directory ([`crate::state::remotes`]) and resumed with `--since-id`, and
//! the ids recently handed on are dropped if they come again, so an event crosses at most
//! once across reconnects and restarts. `status` shows each link ([`health`]).

pub mod health;
pub mod link;

pub use health::Links;
pub use link::spawn;

/// One `[[remote]]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteConfig {
    /// Letters, digits, `.`, `_`, `-`: shown as `project@name`, and a state file's name.
    pub name: String,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `ssh [options] DEST PROGRAM tail --json --follow`; `program` is `baton` unless
    /// `remote_baton` names it (a non-interactive ssh shell's PATH often lacks it).
    Ssh {
        dest: String,
        options: Vec<String>,
        program: String,
    },
    /// Any argv that prints the stream; `--since-id ID` is appended when there is one.
    Command(Vec<String>),
}

impl RemoteConfig {
    /// The child's argv, resuming after `last` when there is one.
    pub fn argv(&self, last: Option<&str>) -> Vec<String> {
        let mut argv: Vec<String> = match &self.source {
            Source::Ssh {
                dest,
                options,
                program,
            } => {
                let mut a: Vec<String> =
                    ["ssh", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=15"]
                        .map(str::to_owned)
                        .into();
                a.extend(options.iter().cloned());
                // The end of options: the destination cannot be read as one.
                a.push("--".to_owned());
                a.push(dest.clone());
                a.push(program.clone());
                a.extend(["tail", "--json", "--follow"].map(str::to_owned));
                a
            }
            Source::Command(argv) => argv.clone(),
        };
        if let Some(id) = last {
            argv.push("--since-id".to_owned());
            argv.push(id.to_owned());
        }
        argv
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_resumes_after_the_last_id() {
        let ssh = RemoteConfig {
            name: "devbox".to_owned(),
            source: Source::Ssh {
                dest: "devbox".to_owned(),
                options: Vec::new(),
                program: "baton".to_owned(),
            },
        };
        assert_eq!(
            ssh.argv(Some("abc")).join(" "),
            "ssh -o BatchMode=yes -o ServerAliveInterval=15 -- devbox baton tail --json \
             --follow --since-id abc"
        );
        assert!(!ssh.argv(None).contains(&"--since-id".to_owned()));
        let cmd = RemoteConfig {
            name: "box".to_owned(),
            source: Source::Command(vec!["docker".to_owned(), "exec".to_owned()]),
        };
        assert_eq!(cmd.argv(Some("x")).join(" "), "docker exec --since-id x");
    }
}
