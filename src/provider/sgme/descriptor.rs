//! SGME's descriptor: its L0 Markdown files are told by their path alone.

use super::{SgmeProjector, is_l0_file};
use crate::provider::Projector;
use crate::provider::audit::{self, Audit};
use crate::provider::descriptor::Agent;
use crate::provider::descriptor::agent_names;
use std::path::Path;

pub struct Sgme;

impl Agent for Sgme {
    agent_names!(Sgme, "sgme", "SGME");

    /// `raw/{sessions,uploads,external}/*.md`; `archive/**/*.md.zst` never matches.
    fn is_candidate(&self, path: &Path) -> bool {
        is_l0_file(path)
    }

    /// SGME L0: `raw/{sessions,uploads,external}/{file_id}.md`.
    fn claims_path(&self, path: &Path) -> bool {
        let raw = path
            .parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .is_some_and(|n| n == "raw");
        raw && is_l0_file(path)
    }

    fn projector(&self, path: &Path) -> Box<dyn Projector> {
        Box::new(SgmeProjector::new(path))
    }

    /// Markdown lines are text, not records.
    fn glues_records(&self) -> bool {
        false
    }

    /// A block's heading and its first body line both speak for the block.
    fn one_record_a_line(&self) -> bool {
        false
    }

    fn auditor(&self, path: &Path) -> Box<dyn Audit> {
        audit::sgme_audit(path)
    }
}
