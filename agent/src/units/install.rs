//! Unit names and the `[Install]` section of unit files, as `systemctl enable` reads them.

/// The `[Install]` settings that decide which links enabling a unit creates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstallInfo {
    /// `WantedBy=`: links in `<target>.wants/`.
    pub wanted_by: Vec<String>,
    /// `RequiredBy=`: links in `<target>.requires/`.
    pub required_by: Vec<String>,
    /// `UpheldBy=`: links in `<target>.upholds/`.
    pub upheld_by: Vec<String>,
    /// `Alias=`: extra names, as symlinks beside the unit.
    pub alias: Vec<String>,
    /// `Also=`: units enabled and disabled together with this one.
    pub also: Vec<String>,
    /// `DefaultInstance=` of a template.
    pub default_instance: Option<String>,
}

impl InstallInfo {
    /// Parses the `[Install]` section of a unit file's text. Unknown keys are ignored; an empty
    /// assignment (`WantedBy=`) resets the list, as in systemd.
    pub fn parse(text: &str) -> Self {
        let mut info = InstallInfo::default();
        let mut in_install = false;
        for line in logical_lines(text) {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if line.starts_with('[') {
                in_install = line == "[Install]";
                continue;
            }
            if !in_install {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let list = match key.trim() {
                "WantedBy" => &mut info.wanted_by,
                "RequiredBy" => &mut info.required_by,
                "UpheldBy" => &mut info.upheld_by,
                "Alias" => &mut info.alias,
                "Also" => &mut info.also,
                "DefaultInstance" => {
                    let v = value.trim();
                    info.default_instance = (!v.is_empty()).then(|| v.to_string());
                    continue;
                }
                _ => continue,
            };
            if value.trim().is_empty() {
                list.clear();
            } else {
                list.extend(value.split_whitespace().map(str::to_string));
            }
        }
        info
    }

    /// Whether enabling creates any link for this unit itself (else the unit is `static`, or
    /// `indirect` when it only names `Also=` units).
    pub fn has_links(&self) -> bool {
        !(self.wanted_by.is_empty()
            && self.required_by.is_empty()
            && self.upheld_by.is_empty()
            && self.alias.is_empty())
    }
}

/// Unit types systemd knows (the suffix after the last dot).
const UNIT_TYPES: [&str; 11] = [
    "service",
    "socket",
    "target",
    "device",
    "mount",
    "automount",
    "swap",
    "timer",
    "path",
    "slice",
    "scope",
];

/// systemd's longest unit name.
const UNIT_NAME_MAX: usize = 255;

/// Checks `name` as systemd's `unit_name_is_valid` does: at most 255 characters of
/// `A-Za-z0-9:-_.\` (and `@` after the prefix), a non-empty prefix, at most one instance
/// separator, and a known type suffix. Such a name is one path segment: it cannot leave the
/// directory it is joined to. The error says what is wrong.
pub fn check_unit_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("it is empty");
    }
    if name.len() > UNIT_NAME_MAX {
        return Err("it is longer than 255 characters");
    }
    let valid = |c: char| c.is_ascii_alphanumeric() || ":-_.\\@".contains(c);
    if !name.chars().all(valid) {
        return Err("it has a character other than A-Za-z0-9:-_.\\@ (such as '/')");
    }
    let Some((stem, suffix)) = name.rsplit_once('.') else {
        return Err("it has no type suffix");
    };
    if !UNIT_TYPES.contains(&suffix) {
        return Err("its suffix is not a unit type");
    }
    let prefix = stem.split_once('@').map_or(stem, |(p, _)| p);
    if prefix.is_empty() {
        return Err("it has an empty prefix");
    }
    Ok(())
}

impl InstallInfo {
    /// Checks every name the section gives (`WantedBy=`, `RequiredBy=`, `UpheldBy=`, `Alias=`,
    /// `Also=`) as a unit name, and that an alias has `unit`'s type (and, for a template, is a
    /// template), as `systemctl enable` requires: each becomes a link (or its directory) under
    /// the unit directory, so a path or `..` would place a link anywhere. The error names the
    /// setting and the value (neither is a secret).
    pub fn check(&self, unit: &str) -> Result<(), String> {
        let lists = [
            ("WantedBy", &self.wanted_by),
            ("RequiredBy", &self.required_by),
            ("UpheldBy", &self.upheld_by),
            ("Alias", &self.alias),
            ("Also", &self.also),
        ];
        for (key, values) in lists {
            for value in values.iter() {
                check_unit_name(value).map_err(|why| {
                    format!("[Install] {key}={value:?} is not a unit name: {why}")
                })?;
            }
        }
        let this = UnitName::parse(unit);
        for alias in &self.alias {
            let other = UnitName::parse(alias);
            let same_type = this.as_ref().map(|n| n.suffix) == other.as_ref().map(|n| n.suffix);
            let template = |n: &Option<UnitName<'_>>| n.as_ref().is_some_and(|n| n.is_template());
            if !same_type || template(&this) != template(&other) {
                return Err(format!(
                    "[Install] Alias={alias:?} is not a name of the same kind as {unit:?} \
                     (same type, and a template only for a template)"
                ));
            }
        }
        if let Some(instance) = &self.default_instance {
            let valid = |c: char| c.is_ascii_alphanumeric() || ":-_.\\@".contains(c);
            if !instance.chars().all(valid) {
                return Err(format!(
                    "[Install] DefaultInstance={instance:?} has a character other than \
                     A-Za-z0-9:-_.\\@ (such as '/')"
                ));
            }
        }
        Ok(())
    }
}

/// Joins lines ending in a backslash with the next one.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for raw in text.lines() {
        match raw.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(raw);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A unit name split into its parts: `prefix@instance.type`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitName<'a> {
    /// Part before `@` (or before the suffix).
    pub prefix: &'a str,
    /// `Some("")` for a template (`foo@.service`), `Some("x")` for an instance, `None` otherwise.
    pub instance: Option<&'a str>,
    /// Unit type suffix, without the dot (`service`).
    pub suffix: &'a str,
}

impl<'a> UnitName<'a> {
    /// Splits `name`; `None` if it has no type suffix.
    pub fn parse(name: &'a str) -> Option<Self> {
        let (stem, suffix) = name.rsplit_once('.')?;
        if stem.is_empty() || suffix.is_empty() {
            return None;
        }
        Some(match stem.split_once('@') {
            Some((prefix, instance)) => UnitName {
                prefix,
                instance: Some(instance),
                suffix,
            },
            None => UnitName {
                prefix: stem,
                instance: None,
                suffix,
            },
        })
    }

    /// The template this instance comes from (`foo@x.service` → `foo@.service`).
    pub fn template(&self) -> Option<String> {
        match self.instance {
            Some(i) if !i.is_empty() => Some(format!("{}@.{}", self.prefix, self.suffix)),
            _ => None,
        }
    }

    /// Whether this is a template without an instance (`foo@.service`).
    pub fn is_template(&self) -> bool {
        self.instance == Some("")
    }

    /// The instance name of this template for `instance`.
    pub fn with_instance(&self, instance: &str) -> String {
        format!("{}@{}.{}", self.prefix, instance, self.suffix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_install_section() {
        let text = "[Unit]\nWantedBy=ignored.target\n[Service]\nExecStart=/bin/true\n\n[Install]\n# c\nWantedBy=multi-user.target \\\n  graphical.target\nRequiredBy=a.target\nWantedBy=b.target\nAlias=x.service\nAlso=y.service z.service\nDefaultInstance=one\n[X-Other]\nWantedBy=no.target\n";
        let info = InstallInfo::parse(text);
        assert_eq!(
            info.wanted_by,
            ["multi-user.target", "graphical.target", "b.target"]
        );
        assert_eq!(info.required_by, ["a.target"]);
        assert_eq!(info.alias, ["x.service"]);
        assert_eq!(info.also, ["y.service", "z.service"]);
        assert_eq!(info.default_instance.as_deref(), Some("one"));
        assert!(info.has_links());
    }

    #[test]
    fn empty_assignment_resets_and_static_units_have_no_links() {
        let info = InstallInfo::parse("[Install]\nWantedBy=a.target\nWantedBy=\n");
        assert!(info.wanted_by.is_empty());
        assert!(!info.has_links());
        assert!(!InstallInfo::parse("[Service]\nExecStart=/bin/true\n").has_links());
    }

    #[test]
    fn install_names_must_be_unit_names_of_the_right_kind() {
        let ok = "[Install]\nWantedBy=multi-user.target getty@tty1.service\nAlias=x.service\nAlso=y.socket\n";
        assert_eq!(InstallInfo::parse(ok).check("a.service"), Ok(()));
        for (text, unit, err) in [
            (
                "[Install]\nWantedBy=/etc/cron.d\n",
                "a.service",
                "[Install] WantedBy=\"/etc/cron.d\" is not a unit name: it has a character other than A-Za-z0-9:-_.\\@ (such as '/')",
            ),
            (
                "[Install]\nRequiredBy=../../x.target\n",
                "a.service",
                "[Install] RequiredBy=\"../../x.target\" is not a unit name: it has a character other than A-Za-z0-9:-_.\\@ (such as '/')",
            ),
            (
                "[Install]\nAlias=/etc/cron.d/evil.service\n",
                "a.service",
                "[Install] Alias=\"/etc/cron.d/evil.service\" is not a unit name: it has a character other than A-Za-z0-9:-_.\\@ (such as '/')",
            ),
            (
                "[Install]\nAlias=a.socket\n",
                "a.service",
                "[Install] Alias=\"a.socket\" is not a name of the same kind as \"a.service\" (same type, and a template only for a template)",
            ),
            (
                "[Install]\nAlso=..\n",
                "a.service",
                "[Install] Also=\"..\" is not a unit name: its suffix is not a unit type",
            ),
            (
                "[Install]\nUpheldBy=@.target\n",
                "a.service",
                "[Install] UpheldBy=\"@.target\" is not a unit name: it has an empty prefix",
            ),
            (
                "[Install]\nWantedBy=a.conf\n",
                "a.service",
                "[Install] WantedBy=\"a.conf\" is not a unit name: its suffix is not a unit type",
            ),
            (
                "[Install]\nDefaultInstance=../x\n",
                "a@.service",
                "[Install] DefaultInstance=\"../x\" has a character other than A-Za-z0-9:-_.\\@ (such as '/')",
            ),
        ] {
            assert_eq!(
                InstallInfo::parse(text).check(unit).unwrap_err(),
                err,
                "{text}"
            );
        }
        let long = format!("{}.service", "a".repeat(250));
        assert_eq!(
            check_unit_name(&long),
            Err("it is longer than 255 characters")
        );
    }

    #[test]
    fn unit_names() {
        let t = UnitName::parse("getty@.service").unwrap();
        assert!(t.is_template());
        assert_eq!(t.with_instance("tty1"), "getty@tty1.service");
        let i = UnitName::parse("getty@tty1.service").unwrap();
        assert_eq!(i.template().as_deref(), Some("getty@.service"));
        assert_eq!(UnitName::parse("a.service").unwrap().template(), None);
        assert!(UnitName::parse("noext").is_none());
    }
}
