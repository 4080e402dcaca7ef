//! Test support, never shipped: shared fixtures (a private system bus, an ostree sysroot) and
//! stand-ins for services these machines do not have (rpm-ostree).

pub mod dbus;
pub mod sysroot;
