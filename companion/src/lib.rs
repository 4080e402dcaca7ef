//! mco-companion library.

pub mod negotiate;
pub mod server;
