//! Build script of the shipped binaries (mco-agent, mco-firstboot, mco-companion): link them
//! with packed relative relocations (`-z pack-relative-relocs`, DT_RELR) when the C library they
//! link against can load them.
//!
//! A position-independent executable carries one 24-byte `R_X86_64_RELATIVE` entry for every
//! pointer in its data (vtables, string tables, static slices): over 1 MB of the agent.
//! DT_RELR stores the same as a bitmap, a few percent of that (docs/benchmarks.md "## Size").
//! glibc reads it from 2.36 on, and such a binary asks for the version node `GLIBC_ABI_DT_RELR`,
//! so it would not start on an older one (RHEL 9's 2.34). The Containerfile builds with the
//! same C library as the node, so the flag is given only when the build's libc.so.6 defines
//! that node; otherwise the binary is linked as before. Not when cross-compiling (the host's
//! C library says nothing about the target's).

use std::env;
use std::fs;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-env-changed=CC");
    let var = |name: &str| env::var(name).unwrap_or_default();
    if var("HOST") != var("TARGET")
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
    {
        return;
    }
    // rustc links through `cc` on linux-gnu; ask it which libc.so.6 the link will use.
    let Ok(out) = Command::new("cc")
        .arg("-print-file-name=libc.so.6")
        .output()
    else {
        return;
    };
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // `cc` prints the bare name when it cannot find the file.
    if !out.status.success() || !path.starts_with('/') {
        return;
    }
    let Ok(libc) = fs::read(&path) else {
        return;
    };
    if libc.windows(17).any(|w| w == b"GLIBC_ABI_DT_RELR") {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
