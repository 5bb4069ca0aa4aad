//! `baton unit`: the systemd user unit, `systemd/baton.service` (the packagers' template)
//! with its ExecStart naming a real binary.

use std::path::{Path, PathBuf};

/// The template. Its ExecStart is a placeholder that packagers and `baton unit` replace.
pub const TEMPLATE: &str = include_str!("../systemd/baton.service");

/// The template's ExecStart line, replaced as a whole.
pub const TEMPLATE_EXEC_START: &str = "ExecStart=%h/.cargo/bin/baton run";

#[derive(Debug, thiserror::Error)]
pub enum UnitError {
    #[error("cannot find the running baton binary: {0}")]
    Exe(#[source] std::io::Error),
    /// systemd refuses an executable path holding quotes, backslashes or control
    /// characters ("Executable name contains special characters").
    #[error(
        "the binary's path {0:?} cannot be named in a systemd unit (it holds a quote, a \
         backslash, a control character or non-UTF-8 bytes); install baton elsewhere, or \
         write the unit by hand"
    )]
    Unnameable(PathBuf),
}

/// The running binary, with symlinks resolved: what ExecStart must name so the unit keeps
/// working whatever PATH the user manager has.
pub fn running_binary() -> Result<PathBuf, UnitError> {
    std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(UnitError::Exe)
}

/// `bin` as the first word of an ExecStart line: `%` doubled (systemd would expand it as a
/// specifier), and double-quoted when it holds whitespace. Characters systemd rejects in
/// an executable name are refused here, so the unit never fails to load.
pub fn exec_path(bin: &Path) -> Result<String, UnitError> {
    let unnameable = || UnitError::Unnameable(bin.to_owned());
    let s = bin.to_str().ok_or_else(unnameable)?;
    if !bin.is_absolute() || s.chars().any(|c| c.is_control() || "\"'\\".contains(c)) {
        return Err(unnameable());
    }
    let escaped = s.replace('%', "%%");
    Ok(if escaped.chars().any(char::is_whitespace) {
        format!("\"{escaped}\"")
    } else {
        escaped
    })
}

/// The template with ExecStart running `bin`.
pub fn render(bin: &Path) -> Result<String, UnitError> {
    let line = format!("ExecStart={} run", exec_path(bin)?);
    Ok(TEMPLATE.replace(TEMPLATE_EXEC_START, &line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_has_the_placeholder_once() {
        assert_eq!(TEMPLATE.matches(TEMPLATE_EXEC_START).count(), 1);
        assert_eq!(
            TEMPLATE
                .lines()
                .filter(|l| l.starts_with("ExecStart="))
                .collect::<Vec<_>>(),
            [TEMPLATE_EXEC_START]
        );
    }

    #[test]
    fn exec_path_escapes_specifiers_and_quotes_spaces() {
        let p = |s: &str| exec_path(Path::new(s)).map_err(|e| e.to_string());
        assert_eq!(p("/usr/bin/baton").unwrap(), "/usr/bin/baton");
        assert_eq!(p("/opt/a%nb/baton").unwrap(), "/opt/a%%nb/baton");
        assert_eq!(
            p("/home/me/my bin/baton").unwrap(),
            "\"/home/me/my bin/baton\""
        );
        assert_eq!(p("/home/$x/baton").unwrap(), "/home/$x/baton");
        for bad in [
            "/a\"b/baton",
            "/a'b/baton",
            "/a\\b/baton",
            "/a\nb/baton",
            "baton",
        ] {
            assert!(p(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn render_replaces_only_exec_start() {
        let unit = render(Path::new("/usr/bin/baton")).unwrap();
        assert!(!unit.contains(TEMPLATE_EXEC_START));
        let (mut same, mut changed) = (0, Vec::new());
        for (new, old) in unit.lines().zip(TEMPLATE.lines()) {
            if new == old {
                same += 1;
            } else {
                changed.push((old, new));
            }
        }
        assert_eq!(
            changed,
            [(TEMPLATE_EXEC_START, "ExecStart=/usr/bin/baton run")]
        );
        assert_eq!(same + 1, TEMPLATE.lines().count());
        assert_eq!(unit.lines().count(), TEMPLATE.lines().count());
    }
}
