//! `org.projectatomic.rpmostree1.Sysroot` at `/org/projectatomic/rpmostree1/Sysroot`.

use std::collections::HashMap;
use std::sync::Arc;

use zbus::message::Header;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

use super::daemon::{Shared, os_object_path};
use super::error::{DaemonError, VarDict, opt_str};

pub struct SysrootIface {
    shared: Arc<Shared>,
}

impl SysrootIface {
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

#[zbus::interface(name = "org.projectatomic.rpmostree1.Sysroot")]
impl SysrootIface {
    /// The booted OS object, or `/` when the sysroot is not booted.
    #[zbus(property)]
    async fn booted(&self) -> zbus::fdo::Result<OwnedObjectPath> {
        let snapshot = self
            .shared
            .snapshot()
            .await
            .map_err(|e| zbus::fdo::Error::Failed(e.message))?;
        let path = match snapshot.booted_deployment() {
            Some(d) => os_object_path(&d.osname),
            None => "/".to_string(),
        };
        OwnedObjectPath::try_from(path).map_err(|e| zbus::fdo::Error::Failed(e.to_string()))
    }

    #[zbus(property)]
    fn path(&self) -> String {
        self.shared.config.sysroot.display().to_string()
    }

    #[zbus(property)]
    async fn active_transaction(&self) -> (String, String, String) {
        self.shared.active().await.0
    }

    #[zbus(property)]
    async fn active_transaction_path(&self) -> String {
        self.shared.active().await.1
    }

    #[zbus(property)]
    fn automatic_update_policy(&self) -> String {
        "none".into()
    }

    /// All deployments in boot order.
    #[zbus(property)]
    async fn deployments(&self) -> zbus::fdo::Result<Vec<HashMap<String, OwnedValue>>> {
        let snapshot = self
            .shared
            .snapshot()
            .await
            .map_err(|e| zbus::fdo::Error::Failed(e.message))?;
        Ok(snapshot.deployments.iter().map(|d| d.to_dict()).collect())
    }

    async fn register_client(
        &self,
        options: VarDict,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<(), DaemonError> {
        self.shared
            .authorize(&hdr, "Sysroot", "RegisterClient")
            .await?;
        let sender = hdr.sender().map(|s| s.to_string()).unwrap_or_default();
        let id = opt_str(&options, "id")?.unwrap_or_else(|| "(unknown)".into());
        self.shared.register_client(&sender, &id);
        Ok(())
    }

    async fn unregister_client(
        &self,
        _options: VarDict,
        #[zbus(header)] hdr: Header<'_>,
    ) -> Result<(), DaemonError> {
        self.shared
            .authorize(&hdr, "Sysroot", "UnregisterClient")
            .await?;
        let sender = hdr.sender().map(|s| s.to_string()).unwrap_or_default();
        self.shared.unregister_client(&sender);
        Ok(())
    }

    /// Re-reads the sysroot; properties read afterwards reflect it.
    async fn reload(&self) -> Result<(), DaemonError> {
        self.shared.snapshot().await?;
        self.shared.sysroot_changed().await;
        Ok(())
    }

    /// There is no daemon configuration to reload; same as `Reload`.
    async fn reload_config(&self, #[zbus(header)] hdr: Header<'_>) -> Result<(), DaemonError> {
        self.shared
            .authorize(&hdr, "Sysroot", "ReloadConfig")
            .await?;
        self.shared.snapshot().await?;
        self.shared.sysroot_changed().await;
        Ok(())
    }

    /// The object of OS `name`, or of the booted OS for an empty name.
    #[zbus(name = "GetOS")]
    async fn get_os(&self, name: String) -> Result<OwnedObjectPath, DaemonError> {
        let snapshot = self.shared.snapshot().await?;
        let path = if name.is_empty() {
            match snapshot.booted_deployment() {
                Some(d) => os_object_path(&d.osname),
                None => "/".into(),
            }
        } else if snapshot.osnames().contains(&name) {
            os_object_path(&name)
        } else {
            return Err(DaemonError::new(
                super::error::RPMOSTREED_FAILED,
                format!("OS name \"{name}\" not found"),
            ));
        };
        OwnedObjectPath::try_from(path).map_err(|e| DaemonError::failed(e.to_string()))
    }
}
