//! zbus proxies for the parts of `org.projectatomic.rpmostree1` the agent uses (names and
//! signatures as `org.projectatomic.rpmostree1.xml` declares them).

use std::collections::HashMap;

use zbus::zvariant::{OwnedObjectPath, OwnedValue, Value};

/// An `a{sv}` argument.
pub type Options<'a> = HashMap<&'a str, Value<'a>>;

#[zbus::proxy(
    interface = "org.projectatomic.rpmostree1.Sysroot",
    default_service = "org.projectatomic.rpmostree1",
    default_path = "/org/projectatomic/rpmostree1/Sysroot"
)]
pub trait Sysroot {
    fn register_client(&self, options: Options<'_>) -> zbus::Result<()>;

    fn unregister_client(&self, options: Options<'_>) -> zbus::Result<()>;

    fn reload(&self) -> zbus::Result<()>;

    #[zbus(name = "GetOS")]
    fn get_os(&self, name: &str) -> zbus::Result<OwnedObjectPath>;

    #[zbus(property)]
    fn booted(&self) -> zbus::Result<OwnedObjectPath>;

    #[zbus(property)]
    fn active_transaction(&self) -> zbus::Result<(String, String, String)>;

    #[zbus(property)]
    fn active_transaction_path(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn deployments(&self) -> zbus::Result<Vec<HashMap<String, OwnedValue>>>;
}

#[zbus::proxy(
    interface = "org.projectatomic.rpmostree1.OS",
    default_service = "org.projectatomic.rpmostree1"
)]
pub trait Os {
    fn kernel_args(
        &self,
        existing_kernel_arg_string: &str,
        kernel_args_added: &[&str],
        kernel_args_replaced: &[&str],
        kernel_args_removed: &[&str],
        options: Options<'_>,
    ) -> zbus::Result<String>;

    fn rebase(
        &self,
        options: Options<'_>,
        refspec: &str,
        packages: &[&str],
    ) -> zbus::Result<String>;

    fn update_deployment(
        &self,
        modifiers: Options<'_>,
        options: Options<'_>,
    ) -> zbus::Result<String>;

    fn cleanup(&self, elements: &[&str]) -> zbus::Result<String>;

    fn get_deployment_boot_config(
        &self,
        deployid: &str,
        is_pending: bool,
    ) -> zbus::Result<HashMap<String, OwnedValue>>;

    fn finalize_deployment(&self, options: Options<'_>) -> zbus::Result<String>;

    fn rollback(&self, options: Options<'_>) -> zbus::Result<String>;

    #[zbus(property)]
    fn name(&self) -> zbus::Result<String>;
}
