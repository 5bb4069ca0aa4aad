//! Norma's descriptor: how its transcripts are told (it has no default root).

use super::NormaProjector;
use crate::provider::Projector;
use crate::provider::audit::{self, Audit};
use crate::provider::descriptor::{Agent, agent_names, uuid_of};
use std::path::Path;

pub struct Norma;

impl Agent for Norma {
    agent_names!(Norma, "norma", "Norma");

    fn first_record_raw(&self, line: &[u8]) -> bool {
        let has = |needle: &[u8]| memchr::memmem::find(line, needle).is_some();
        // Norma's first record has no `parent_uuid` (seed 000), so `uuid` must do.
        has(b"\"session_id\"") && (has(b"\"uuid\"") || has(b"\"parent_uuid\""))
            || has(b"\"is_sidechain\"")
    }

    fn projector(&self, path: &Path) -> Box<dyn Projector> {
        Box::new(NormaProjector::new(path))
    }

    fn auditor(&self, path: &Path) -> Box<dyn Audit> {
        audit::json_audit(&super::facts::NormaRecords, path)
    }

    fn record_id(&self, line: &[u8]) -> Option<String> {
        uuid_of(line, |r: super::Rec<'_>| r.uuid)
    }

    fn has_subagent_files(&self) -> bool {
        true
    }
}
