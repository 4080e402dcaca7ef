//! The C allocator's settings for a long-running server whose large buffers come and go:
//! rendered configs, their served bodies and the JSON of watched MachineConfigs, 1 to 3 MiB
//! each.
//!
//! glibc's malloc serves blocks of 128 KiB and more from `mmap` and gives them back when freed,
//! but each such free raises that threshold (up to 32 MiB): after the first rollout every
//! config-sized buffer comes from the heap arenas instead, where the space freed between
//! rollouts stays resident. Fixing the threshold at 128 KiB keeps it returned. In the scale
//! harness (docs/benchmarks.md, "A 1,000-node pool") the companion's peak RSS went from 60.6 to
//! 55.9 MiB, for about 1 ms more CPU per node updated (fresh mappings' pages are zeroed).
//! Limiting the arenas as well (`M_ARENA_MAX` 2) did not help.
//!
//! An administrator's own settings win: with `GLIBC_TUNABLES` or `MALLOC_MMAP_THRESHOLD_` in
//! the environment, nothing is changed.

// The one call into the C library, whose contract is only that it may fail.
#![allow(unsafe_code)]

/// The mmap threshold set, in bytes (glibc's initial value, kept from rising).
pub const MMAP_THRESHOLD: usize = 128 * 1024;

/// Applies the settings; call it first in `main`. Returns whether they were applied.
pub fn tune() -> bool {
    let overridden = ["GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_"]
        .iter()
        .any(|name| std::env::var_os(name).is_some());
    !overridden && set_mmap_threshold(MMAP_THRESHOLD)
}

/// Says what [`tune`] did, once logging is set up.
pub fn log_settings(applied: bool) {
    if applied {
        tracing::debug!(bytes = MMAP_THRESHOLD, "malloc's mmap threshold fixed");
    } else {
        tracing::info!("malloc's settings left as the environment sets them");
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_mmap_threshold(bytes: usize) -> bool {
    let Ok(value) = libc::c_int::try_from(bytes) else {
        return false;
    };
    // SAFETY: mallopt only changes malloc's parameters, under malloc's own lock; it returns 0
    // when it refuses the value.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, value) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_mmap_threshold(_bytes: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn glibc_takes_the_threshold() {
        // what tune() sets; tune() itself depends on the test environment's variables
        assert!(super::set_mmap_threshold(super::MMAP_THRESHOLD));
    }
}
