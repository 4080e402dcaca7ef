//! qemu VM test harness: boots the Debian images `tests/vm/build-image.sh` builds under TCG,
//! follows reboots through the ostree BLS entries, and runs commands in the guest through
//! qemu-guest-agent. Scenarios live in `tests/`; they are `#[ignore]`d so that
//! `cargo nextest run --workspace` never boots a VM: `tests/vm/run.sh` runs them.
//!
//! ```no_run
//! use mco_vm_tests::{Disk, Vm};
//! let mut vm = Vm::builder("example", Disk::Ostree).boot()?;
//! assert!(vm.run("cat /proc/cmdline")?.contains("ostree="));
//! vm.run("ostree admin deploy --stage --os=debian debian/mco/b")?;
//! vm.reboot()?;
//! assert_eq!(vm.run("cat /usr/share/mco-os-version")?.trim(), "b");
//! vm.poweroff()?;
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod agent;
pub mod bls;
pub mod cluster;
pub mod console;
pub mod ext4;
pub mod images;
pub mod powercut;
pub mod provision;
pub mod qemu;
pub mod qga;
pub mod vm;

pub use images::Images;
pub use qga::ExecOutput;
pub use vm::{Disk, Vm, VmBuilder};
