//! Kernel arguments: the MachineConfig side (`kernelArguments` entries split with the kernel's
//! rules, the `rpm-ostree kargs` argv of a change, the on-disk check) and the agent side, which
//! must read back every argv the plan produces and apply it to the booted command line with
//! libostree's rules. The input is three NUL-separated parts: the old entries and the new entries
//! (one per line), and the booted command line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use machine_config::kargs;
use mco_agent::os::KargsChange;
use mco_fuzz::text_parts;

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

fuzz_target!(|data: &[u8]| {
    let Some(parts) = text_parts(data, 3) else {
        return;
    };
    let (old, new, booted) = (lines(parts[0]), lines(parts[1]), parts[2]);

    for entry in old.iter().chain(&new) {
        for token in kargs::split(entry) {
            assert!(!token.is_empty(), "empty token from {entry:?}");
        }
    }
    let argv = kargs::rpm_ostree_argv(&old, &new);
    if kargs::changed(&old, &new) {
        let tokens = kargs::split_all(&old).len() + kargs::split_all(&new).len();
        assert_eq!(argv.len(), tokens, "one flag per old and new token");
    } else {
        assert!(argv.is_empty(), "an argv for unchanged arguments");
    }
    let change = KargsChange::from_argv(&argv)
        .unwrap_or_else(|e| panic!("the agent refuses the plan's argv {argv:?}: {e}"));
    assert_eq!(change.is_empty(), argv.is_empty());
    let _ = change.apply_to(booted);

    let missing = kargs::missing(&new, booted);
    let expected = kargs::split_all(&new);
    assert!(missing.iter().all(|m| expected.contains(m)));
    assert_eq!(kargs::check(&new, booted).is_ok(), missing.is_empty());
});
