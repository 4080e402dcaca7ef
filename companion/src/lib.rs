//! mco-companion library.
