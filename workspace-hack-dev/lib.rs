//! Feature unification only, no code: see Cargo.toml (tests/workspace_hack.py).
