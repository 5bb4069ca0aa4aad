//! `baton check`: the transcript audit. (Being built under issue 4.)

use crate::error::Error;
use clap::Args;

/// Arguments of `baton check`.
#[derive(Debug, Args)]
pub struct CheckArgs {}

/// Audits transcripts; returns true when problems were found.
pub fn main(_args: CheckArgs) -> Result<bool, Error> {
    Err(Error::Usage(
        "`baton check` is not available in this build yet".to_owned(),
    ))
}
