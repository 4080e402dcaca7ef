//! Test support, never shipped: shared fixtures (a private system bus, an ostree sysroot, a
//! booted systemd container, a private containerd, a TLS registry with the images a test
//! builds), stand-ins for services these machines do not have (rpm-ostree,
//! a Kubernetes API server, logind, systemd's manager) and TLS material for tests.

pub mod apiserver;
pub mod child;
pub mod component;
pub mod containerd;
pub mod dbus;
pub mod https_get;
pub mod logind;
pub mod nspawn;
pub mod registry;
pub mod rpmostreed;
pub mod shipped;
pub mod sysroot;
pub mod systemd;
pub mod tls;
