//! The node side of mco-agent.

pub mod rootfs;
pub mod units;
pub mod validate;
pub mod apply;
