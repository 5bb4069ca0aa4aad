//! `baton unit`: the systemd user unit, byte for byte `systemd/baton.service`.

use std::io::{self, Write};

/// The unit file's text. CI checks that `baton unit` prints exactly the file.
pub const UNIT: &str = include_str!("../systemd/baton.service");

/// Writes the unit to `out`.
pub fn write(out: &mut impl Write) -> io::Result<()> {
    out.write_all(UNIT.as_bytes())?;
    out.flush()
}
