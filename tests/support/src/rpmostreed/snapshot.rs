//! What the daemon publishes about the sysroot, read from libostree: the `Deployments` property
//! (rpm-ostree's deployment dictionaries), `Booted`, and `GetDeploymentBootConfig`.
//!
//! Snapshots are plain data so they can cross from the blocking thread that reads the sysroot to
//! the async D-Bus side.

use std::collections::HashMap;
use std::path::Path;

use ostree::gio;
use zbus::zvariant::{OwnedValue, Value};

use super::error::{DaemonError, RPMOSTREED_FAILED};
use super::origin::{Base, Origin, image_digest, image_name};

/// Where libostree keeps the "do not finalize" flag of a staged deployment (2022.7).
pub const STAGED_LOCKED_PATH: &str = "/run/ostree/staged-deployment-locked";

/// One deployment, as rpm-ostree describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentSnapshot {
    pub index: usize,
    pub osname: String,
    pub checksum: String,
    pub serial: i32,
    pub booted: bool,
    pub staged: bool,
    pub finalization_locked: bool,
    pub pinned: bool,
    pub version: Option<String>,
    pub timestamp: u64,
    pub base: Option<Base>,
    pub custom_origin: Option<(String, String)>,
    pub requested_packages: Vec<String>,
    pub override_removals: Vec<String>,
    /// BLS keys (`options`, `title`, `linux`, `initrd`, `version`).
    pub bootconfig: Vec<(String, String)>,
}

impl DeploymentSnapshot {
    /// rpm-ostree's deployment id: `<osname>-<checksum>.<serial>`.
    pub fn id(&self) -> String {
        format!("{}-{}.{}", self.osname, self.checksum, self.serial)
    }

    pub fn boot_value(&self, key: &str) -> Option<&str> {
        self.bootconfig
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The deployment dictionary of the `Deployments` property.
    pub fn to_dict(&self) -> HashMap<String, OwnedValue> {
        let mut d = Dict::default();
        d.put("id", self.id());
        d.put("osname", self.osname.clone());
        d.put("serial", self.serial);
        d.put("checksum", self.checksum.clone());
        d.put("booted", self.booted);
        d.put("staged", self.staged);
        if self.finalization_locked {
            d.put("finalization-locked", true);
        }
        d.put("pinned", self.pinned);
        d.put("unlocked", "none".to_string());
        if let Some(v) = &self.version {
            d.put("version", v.clone());
        }
        d.put("timestamp", self.timestamp);
        match &self.base {
            Some(Base::Ostree(r)) => d.put("origin", r.clone()),
            Some(Base::Container(r)) => {
                d.put("container-image-reference", r.clone());
                if let Some(digest) = image_digest(image_name(r)) {
                    d.put("container-image-reference-digest", digest.to_string());
                }
            }
            None => {}
        }
        if let Some((url, desc)) = &self.custom_origin {
            d.put("custom-origin", (url.clone(), desc.clone()));
        }
        // rpm-ostree always sends these, empty or not.
        d.put("requested-packages", self.requested_packages.clone());
        d.put("requested-local-packages", Vec::<String>::new());
        d.put(
            "requested-local-fileoverride-packages",
            Vec::<String>::new(),
        );
        d.put("requested-base-removals", self.override_removals.clone());
        d.put("requested-base-local-replacements", Vec::<String>::new());
        d.put("regenerate-initramfs", false);
        // What is layered: the stand-in "installs" exactly what is requested (see module docs).
        d.put("packages", self.requested_packages.clone());
        d.0
    }
}

/// The sysroot as a whole.
#[derive(Debug, Clone, Default)]
pub struct SysrootSnapshot {
    pub booted: bool,
    pub deployments: Vec<DeploymentSnapshot>,
}

impl SysrootSnapshot {
    /// Reads the sysroot at `path`.
    pub fn read(path: &Path) -> Result<Self, String> {
        let sysroot = ostree::Sysroot::new(Some(&gio::File::for_path(path)));
        sysroot
            .load(gio::Cancellable::NONE)
            .map_err(|e| format!("Loading sysroot {}: {e}", path.display()))?;
        Self::from_sysroot(&sysroot)
    }

    /// Snapshots a loaded sysroot.
    pub fn from_sysroot(sysroot: &ostree::Sysroot) -> Result<Self, String> {
        let repo = sysroot.repo();
        let booted = sysroot.booted_deployment();
        let locked = Path::new(STAGED_LOCKED_PATH).exists();
        let mut deployments = Vec::new();
        for (index, d) in sysroot.deployments().iter().enumerate() {
            let checksum = d.csum().to_string();
            let (commit, _) = repo.load_commit(&checksum).map_err(|e| {
                format!("Reading deployment {index}: loading commit {checksum}: {e}")
            })?;
            let version = ostree::glib::VariantDict::new(Some(&commit.child_value(0)))
                .lookup::<String>("version")
                .ok()
                .flatten();
            let origin = d.origin().map(|kf| Origin::from_keyfile(&kf)).transpose()?;
            let bootconfig = d
                .bootconfig()
                .map(|b| {
                    ["options", "title", "linux", "initrd", "version"]
                        .iter()
                        .filter_map(|k| b.get(k).map(|v| (k.to_string(), v.to_string())))
                        .collect()
                })
                .unwrap_or_default();
            let staged = d.is_staged();
            deployments.push(DeploymentSnapshot {
                index,
                osname: d.osname().to_string(),
                checksum,
                serial: d.deployserial(),
                booted: booted.as_ref().is_some_and(|b| b.equal(d)),
                staged,
                finalization_locked: staged && locked,
                pinned: d.is_pinned(),
                version,
                timestamp: ostree::commit_get_timestamp(&commit),
                base: origin.as_ref().and_then(|o| o.base().ok()),
                custom_origin: origin.as_ref().and_then(Origin::custom_origin),
                requested_packages: origin
                    .as_ref()
                    .map(|o| o.requested_packages().into_iter().collect())
                    .unwrap_or_default(),
                override_removals: origin
                    .as_ref()
                    .map(|o| o.override_removals().into_iter().collect())
                    .unwrap_or_default(),
                bootconfig,
            });
        }
        Ok(Self {
            booted: booted.is_some(),
            deployments,
        })
    }

    /// The booted deployment.
    pub fn booted_deployment(&self) -> Option<&DeploymentSnapshot> {
        self.deployments.iter().find(|d| d.booted)
    }

    /// The OS names present, in boot order, without duplicates.
    pub fn osnames(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for d in &self.deployments {
            if !out.contains(&d.osname) {
                out.push(d.osname.clone());
            }
        }
        out
    }

    /// The first deployment of `osname`: the pending one if any, else the booted one (rpm-ostree's
    /// "origin merge deployment").
    pub fn default_for(&self, osname: &str) -> Option<&DeploymentSnapshot> {
        self.deployments.iter().find(|d| d.osname == osname)
    }

    /// libostree's merge deployment: the booted one when it is of `osname`, else the first.
    pub fn merge_for(&self, osname: &str) -> Option<&DeploymentSnapshot> {
        self.booted_deployment()
            .filter(|d| d.osname == osname)
            .or_else(|| self.default_for(osname))
    }

    /// The deployment after the booted (or, not booted, after the merge) one.
    pub fn rollback_for(&self, osname: &str) -> Option<&DeploymentSnapshot> {
        let anchor = self.merge_for(osname)?.index;
        self.deployments
            .iter()
            .find(|d| d.osname == osname && d.index > anchor)
    }

    /// `GetDeploymentBootConfig(deployid, is_pending)`: `deployid` is a deployment index (or
    /// empty for the default or merge deployment of `osname`). A staged deployment has only
    /// `options` besides `staged`.
    pub fn boot_config(
        &self,
        osname: &str,
        deployid: &str,
        is_pending: bool,
    ) -> Result<HashMap<String, OwnedValue>, DaemonError> {
        let target = if deployid.is_empty() {
            let d = if is_pending {
                self.default_for(osname)
            } else {
                self.merge_for(osname)
            };
            d.ok_or_else(|| DaemonError::failed(format!("No deployments found for os {osname}")))?
        } else {
            if !deployid.bytes().all(|b| b.is_ascii_digit()) {
                return Err(DaemonError::new(
                    RPMOSTREED_FAILED,
                    format!("Invalid deployment index {deployid}, must be a number and >= 0"),
                ));
            }
            let index: usize = deployid.parse().unwrap_or(usize::MAX);
            self.deployments.get(index).ok_or_else(|| {
                DaemonError::new(
                    RPMOSTREED_FAILED,
                    format!(
                        "Out of range deployment index {deployid}, expected < {}",
                        self.deployments.len()
                    ),
                )
            })?
        };
        let mut d = Dict::default();
        d.put("staged", target.staged);
        for (k, v) in &target.bootconfig {
            if target.staged && k != "options" {
                continue;
            }
            d.put(k, v.clone());
        }
        Ok(d.0)
    }
}

#[derive(Default)]
struct Dict(HashMap<String, OwnedValue>);

impl Dict {
    fn put<'a, V: Into<Value<'a>>>(&mut self, key: &str, v: V) {
        let owned = OwnedValue::try_from(v.into()).expect("plain values hold no file descriptors");
        self.0.insert(key.to_string(), owned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(index: usize, osname: &str, booted: bool, staged: bool) -> DeploymentSnapshot {
        DeploymentSnapshot {
            index,
            osname: osname.into(),
            checksum: format!("c{index}"),
            serial: 0,
            booted,
            staged,
            finalization_locked: false,
            pinned: false,
            version: Some("1.0".into()),
            timestamp: 5,
            base: Some(Base::Ostree("fakeos/stable".into())),
            custom_origin: None,
            requested_packages: vec![],
            override_removals: vec![],
            bootconfig: vec![
                ("options".into(), format!("root=x k={index}")),
                ("title".into(), format!("FakeOS (ostree:{index})")),
            ],
        }
    }

    #[test]
    fn boot_config_follows_rpm_ostree_selection() {
        let s = SysrootSnapshot {
            booted: true,
            deployments: vec![dep(0, "fakeos", false, true), dep(1, "fakeos", true, false)],
        };
        let pending = s.boot_config("fakeos", "", true).unwrap();
        assert_eq!(
            String::try_from(pending["options"].clone()).unwrap(),
            "root=x k=0"
        );
        assert!(bool::try_from(&*pending["staged"]).unwrap());
        assert!(
            !pending.contains_key("title"),
            "staged entries only carry options"
        );
        let merge = s.boot_config("fakeos", "", false).unwrap();
        assert_eq!(
            String::try_from(merge["options"].clone()).unwrap(),
            "root=x k=1"
        );
        assert!(merge.contains_key("title"));
        let by_index = s.boot_config("fakeos", "1", true).unwrap();
        assert_eq!(by_index["options"], merge["options"]);
        let e = s.boot_config("fakeos", "x", true).unwrap_err();
        assert_eq!(
            e.message,
            "Invalid deployment index x, must be a number and >= 0"
        );
        let e = s.boot_config("fakeos", "7", true).unwrap_err();
        assert_eq!(e.message, "Out of range deployment index 7, expected < 2");
        let e = s.boot_config("other", "", true).unwrap_err();
        assert_eq!(e.message, "No deployments found for os other");
        assert_eq!(s.rollback_for("fakeos"), None);
    }

    #[test]
    fn dictionaries_carry_the_rpm_ostree_keys() {
        let mut d = dep(0, "fakeos", true, false);
        d.requested_packages = vec!["usbguard".into()];
        let digest = format!("sha256:{}", "ab".repeat(32));
        d.base = Some(Base::Container(format!(
            "ostree-unverified-registry:quay.io/x@{digest}"
        )));
        let dict = d.to_dict();
        assert_eq!(String::try_from(dict["id"].clone()).unwrap(), "fakeos-c0.0");
        assert!(!dict.contains_key("origin"));
        assert_eq!(
            String::try_from(dict["container-image-reference-digest"].clone()).unwrap(),
            digest
        );
        assert_eq!(
            Vec::<String>::try_from(dict["requested-packages"].clone()).unwrap(),
            ["usbguard"]
        );
        assert_eq!(u64::try_from(&*dict["timestamp"]).unwrap(), 5);
        assert!(bool::try_from(&*dict["booted"]).unwrap());
    }
}
