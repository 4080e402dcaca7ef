//! The MachineConfigNode calls of [`KubeNodeApi`]: the node's own object, read, created and
//! merge-patched (status through its subresource), each retried through transient failures.

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

use super::error::ClusterError;
use super::kube_node::KubeNodeApi;
use super::retry::with_retry;

/// API version and kind of the object.
pub const API_VERSION: &str = "machineconfiguration.openshift.io/v1";
pub const KIND: &str = "MachineConfigNode";

impl KubeNodeApi {
    fn machine_config_nodes(&self) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(machine_config::machineconfig::GROUP, "v1", KIND);
        Api::all_with(self.client.clone(), &ApiResource::from_gvk(&gvk))
    }

    fn invalid(&self, action: &str, e: serde_json::Error) -> ClusterError {
        ClusterError::Client {
            action: action.to_string(),
            message: e.to_string(),
        }
    }

    pub(super) async fn get_mcn(&self) -> Result<Option<Value>, ClusterError> {
        let api = self.machine_config_nodes();
        let action = format!("reading machineconfignode {}", self.node);
        let found = with_retry(&self.retry, &action, || api.get_opt(&self.node)).await?;
        found
            .map(|o| serde_json::to_value(o).map_err(|e| self.invalid(&action, e)))
            .transpose()
    }

    pub(super) async fn create_mcn(&self, object: &Value) -> Result<Value, ClusterError> {
        let api = self.machine_config_nodes();
        let action = format!("creating machineconfignode {}", self.node);
        let object: DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| self.invalid(&action, e))?;
        let params = PostParams::default();
        let created = with_retry(&self.retry, &action, || api.create(&params, &object)).await?;
        serde_json::to_value(created).map_err(|e| self.invalid(&action, e))
    }

    pub(super) async fn patch_mcn(
        &self,
        patch: &Value,
        status: bool,
    ) -> Result<Value, ClusterError> {
        let api = self.machine_config_nodes();
        let what = if status { "the status of " } else { "" };
        let action = format!("patching {what}machineconfignode {}", self.node);
        let params = PatchParams::default();
        let patch = Patch::Merge(patch);
        let patched = if status {
            with_retry(&self.retry, &action, || {
                api.patch_status(&self.node, &params, &patch)
            })
            .await?
        } else {
            with_retry(&self.retry, &action, || {
                api.patch(&self.node, &params, &patch)
            })
            .await?
        };
        serde_json::to_value(patched).map_err(|e| self.invalid(&action, e))
    }
}
