//! The agent's hands on a live host, each behind a small trait with a real implementation and
//! an in-memory fake: [`systemd`] (units and jobs) and [`reboot`] (logind, with the
//! staged-deployment safety check) over D-Bus, [`cri`] (the container runtime's image service)
//! over gRPC, and [`command`] (programs with no D-Bus interface: podman, mokutil, journalctl).

pub mod command;
pub mod cri;
pub mod reboot;
pub mod selinux;
pub mod systemd;
