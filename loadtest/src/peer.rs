//! Placeholder until the peer scenario lands (being written now).
use std::path::PathBuf;
pub struct PeerOpts {
    pub canopy_bin: PathBuf,
    pub work_dir: PathBuf,
    pub ks: Vec<u32>,
    pub tree_width: u32,
    pub submits: u32,
    pub queued: u32,
    pub quick: bool,
}
pub struct PeerRow {
    pub metric: String,
    pub unit: String,
    pub nodes: Option<u32>,
    pub canopy: f64,
    pub slurm: Option<f64>,
    pub ratio: Option<f64>,
    pub note: String,
}
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("not yet")]
    NotYet,
}
pub fn run(_o: &PeerOpts, _p: &mut dyn FnMut(&str)) -> Result<Vec<PeerRow>, PeerError> {
    Err(PeerError::NotYet)
}
