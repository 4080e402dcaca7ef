//! `/etc/containers/registries.conf` (v1 and v2 TOML): the "safe change" analysis that decides
//! whether a change needs a drain. The input is two files separated by a NUL byte (old, new).
//! A file that parses is a safe change from itself, and so is appending nothing to an empty file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use machine_config::registries::unsafe_change;
use mco_fuzz::text_parts;

fuzz_target!(|data: &[u8]| {
    let Some(files) = text_parts(data, 2) else {
        return;
    };
    let (old, new) = (files[0], files[1]);
    let _ = unsafe_change(old, new);
    for file in [old, new] {
        if unsafe_change(file, file).is_ok() {
            assert_eq!(
                unsafe_change(file, file),
                Ok(None),
                "no change is not safe:\n{file}"
            );
        }
    }
});
