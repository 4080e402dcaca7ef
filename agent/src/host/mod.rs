//! The agent's hands on a live host, each behind a small trait with a real D-Bus
//! implementation and an in-memory fake: [`systemd`] (units and jobs) and [`reboot`]
//! (logind, with the staged-deployment safety check).

pub mod reboot;
pub mod selinux;
pub mod systemd;
