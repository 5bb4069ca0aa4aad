//! The v1 event stream: one JSON object per line.

use crate::model::Event;
use std::io::{self, Write};

pub struct JsonlSink<W: Write> {
    out: W,
}

impl<W: Write> JsonlSink<W> {
    pub fn new(out: W) -> Self {
        JsonlSink { out }
    }

    /// Writes one event line.
    pub fn write(&mut self, ev: &Event) -> io::Result<()> {
        let mut line = ev.to_json();
        line.push('\n');
        self.out.write_all(line.as_bytes())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
