//! Users and groups of the root, read from its `etc/passwd` and `etc/group` (and the
//! `usr/lib/passwd` / `usr/lib/group` that CoreOS's nss-altfiles consults), so owners given by name
//! in a config resolve to the ids of the node being configured, not of the host running the agent.

use std::path::Path;

use super::{Root, RootError};

/// A `passwd` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Home directory.
    pub home: String,
}

/// A `group` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Group name.
    pub name: String,
    /// Group id.
    pub gid: u32,
}

/// The user and group databases of a root. `etc/` entries come first and win over `usr/lib/`.
#[derive(Clone, Debug, Default)]
pub struct Accounts {
    users: Vec<User>,
    groups: Vec<Group>,
}

impl Accounts {
    /// Reads the databases of `root`; missing files are empty databases.
    pub fn load(root: &Root) -> Result<Self, RootError> {
        let mut accounts = Accounts::default();
        for file in ["/etc/passwd", "/usr/lib/passwd"] {
            if let Some(text) = root.read_to_string(Path::new(file))? {
                accounts.users.extend(text.lines().filter_map(parse_user));
            }
        }
        for file in ["/etc/group", "/usr/lib/group"] {
            if let Some(text) = root.read_to_string(Path::new(file))? {
                accounts.groups.extend(text.lines().filter_map(parse_group));
            }
        }
        Ok(accounts)
    }

    /// Builds databases from `passwd` and `group` texts.
    #[cfg(test)]
    pub fn from_texts(passwd: &str, group: &str) -> Self {
        Accounts {
            users: passwd.lines().filter_map(parse_user).collect(),
            groups: group.lines().filter_map(parse_group).collect(),
        }
    }

    /// The user called `name`.
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.iter().find(|u| u.name == name)
    }

    /// The group called `name`.
    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name)
    }

    /// The first user with id `uid`.
    pub fn user_by_id(&self, uid: u32) -> Option<&User> {
        self.users.iter().find(|u| u.uid == uid)
    }

    /// The first group with id `gid`.
    pub fn group_by_id(&self, gid: u32) -> Option<&Group> {
        self.groups.iter().find(|g| g.gid == gid)
    }
}

fn parse_user(line: &str) -> Option<User> {
    if line.starts_with('#') {
        return None;
    }
    let fields: Vec<&str> = line.split(':').collect();
    if fields.len() < 7 || fields[0].is_empty() {
        return None;
    }
    Some(User {
        name: fields[0].to_string(),
        uid: fields[2].parse().ok()?,
        gid: fields[3].parse().ok()?,
        home: fields[5].to_string(),
    })
}

fn parse_group(line: &str) -> Option<Group> {
    if line.starts_with('#') {
        return None;
    }
    let fields: Vec<&str> = line.split(':').collect();
    if fields.len() < 3 || fields[0].is_empty() {
        return None;
    }
    Some(Group {
        name: fields[0].to_string(),
        gid: fields[2].parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_skips_malformed_lines() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n# comment\nbroken\ncore:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\nbad:x:notanumber:1::/:/bin/sh\n";
        let group = "root:x:0:\nwheel:x:10:core\n:x:5:\ncore:x:1000:\n";
        let a = Accounts::from_texts(passwd, group);
        assert_eq!(
            a.user("core"),
            Some(&User {
                name: "core".into(),
                uid: 1000,
                gid: 1000,
                home: "/var/home/core".into()
            })
        );
        assert!(a.user("bad").is_none());
        assert!(a.user("broken").is_none());
        assert_eq!(a.group("wheel").map(|g| g.gid), Some(10));
        assert!(a.group("").is_none());
    }

    #[test]
    fn etc_wins_over_usr_lib() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::create_dir_all(dir.path().join("usr/lib")).unwrap();
        std::fs::write(
            dir.path().join("etc/passwd"),
            "core:x:1000:1000::/home/core:/bin/bash\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("usr/lib/passwd"),
            "core:x:2000:2000::/x:/bin/sh\nsshd:x:74:74::/:/sbin/nologin\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("usr/lib/group"), "sshd:x:74:\n").unwrap();
        let root = Root::open(dir.path()).unwrap();
        let a = Accounts::load(&root).unwrap();
        assert_eq!(a.user("core").map(|u| u.uid), Some(1000));
        assert_eq!(a.user("sshd").map(|u| u.uid), Some(74));
        assert_eq!(a.group("sshd").map(|g| g.gid), Some(74));
    }
}
