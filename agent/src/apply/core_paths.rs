//! Where `core`'s files live: its home directory and the keys file Ignition writes there.
//! Its own module because both the preparation of an update and the writing of it need them.

use std::path::{Path, PathBuf};

use crate::rootfs::accounts::User;

/// Home of `core` when the user database does not say.
const CORE_HOME: &str = "/home/core";

/// core's home directory: the user database's, else `/home/core`.
pub(crate) fn core_home(core: &User) -> PathBuf {
    PathBuf::from(if core.home.starts_with('/') {
        core.home.as_str()
    } else {
        CORE_HOME
    })
}

/// Path of the keys file under `home`.
pub fn authorized_keys_path(home: &Path) -> PathBuf {
    home.join(".ssh/authorized_keys.d/ignition")
}
