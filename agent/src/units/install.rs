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
