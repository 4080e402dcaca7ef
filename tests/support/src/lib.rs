//! Test support, never shipped: shared fixtures (a private system bus, an ostree sysroot, a
//! booted systemd container) and stand-ins for services these machines do not have (rpm-ostree).

pub mod child;
pub mod dbus;
pub mod nspawn;
pub mod rpmostreed;
pub mod sysroot;
