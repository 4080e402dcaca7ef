//! Helpers shared by the fuzz targets in `fuzz_targets/` (see docs/fuzzing.md).
//!
//! Each target is a thin wrapper over public functions of the project's crates; what a target
//! asserts beyond "no panic" (round trips, cross-checks between crates) is written where the
//! target calls them, and a failed assertion is a crash like any other.

/// Splits a fuzz input into exactly `n` parts at its first `n - 1` NUL bytes (missing parts are
/// empty), so one byte string can carry several independent inputs and mutations of one part
/// leave the others alone.
pub fn parts(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut out: Vec<&[u8]> = data.splitn(n, |&b| b == 0).collect();
    out.resize(n, &[]);
    out
}

/// Like [`parts`], for targets whose inputs are text: `None` when a part is not UTF-8 (the
/// functions under test take `&str`; their callers never hand them anything else).
pub fn text_parts(data: &[u8], n: usize) -> Option<Vec<&str>> {
    parts(data, n)
        .into_iter()
        .map(|p| std::str::from_utf8(p).ok())
        .collect()
}
