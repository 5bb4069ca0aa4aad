//! `baton run`: the live daemon. (Being built under issue 3.)

use crate::error::Error;
use clap::Args;

/// Arguments of `baton run`.
#[derive(Debug, Args)]
pub struct RunArgs {}

/// Runs the daemon until SIGTERM/SIGINT.
pub fn main(_args: RunArgs) -> Result<(), Error> {
    Err(Error::Usage(
        "`baton run` is not available in this build yet".to_owned(),
    ))
}
