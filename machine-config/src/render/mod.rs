//! Rendering: the MCO's merge of a pool's MachineConfigs into one rendered MachineConfig.

pub mod hash;
pub mod merge;

pub use hash::{rendered_name, spec_hash};
pub use merge::merge_ignition;
