//! The MachineConfigNode calls of [`KubeNodeApi`]: the node's own object, read, created and
//! merge-patched (status through its subresource), each retried through transient failures.
//!
//! The agent is the only writer of the object's status, so the copy each create or patch returns
//! is kept and handed out by the next read instead of a GET (one request per write, not two, as
//! the MCD's Get and UpdateStatus pairs are). A write that finds the object gone (404) forgets
//! the copy: the next read asks the API server, and the caller re-creates it.

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

    fn keep_mcn(&self, object: Option<&Value>) {
        *self.mcn.lock().unwrap_or_else(|e| e.into_inner()) = object.cloned();
    }

    pub(super) async fn get_mcn(&self) -> Result<Option<Value>, ClusterError> {
        if let Some(kept) = self.mcn.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(Some(kept));
        }
        let api = self.machine_config_nodes();
        let action = format!("reading machineconfignode {}", self.node);
        let found = with_retry(&self.retry, &action, || api.get_opt(&self.node)).await?;
        let found = found
            .map(|o| serde_json::to_value(o).map_err(|e| self.invalid(&action, e)))
            .transpose()?;
        self.keep_mcn(found.as_ref());
        Ok(found)
    }

    pub(super) async fn create_mcn(&self, object: &Value) -> Result<Value, ClusterError> {
        let api = self.machine_config_nodes();
        let action = format!("creating machineconfignode {}", self.node);
        let object: DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| self.invalid(&action, e))?;
        let params = PostParams::default();
        let created = with_retry(&self.retry, &action, || api.create(&params, &object)).await?;
        let created = serde_json::to_value(created).map_err(|e| self.invalid(&action, e))?;
        self.keep_mcn(Some(&created));
        Ok(created)
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
            .await
        } else {
            with_retry(&self.retry, &action, || {
                api.patch(&self.node, &params, &patch)
            })
            .await
        };
        let patched = match patched {
            Err(e) => {
                if e.code() == Some(404) {
                    self.keep_mcn(None);
                }
                return Err(e);
            }
            Ok(p) => serde_json::to_value(p).map_err(|e| self.invalid(&action, e))?,
        };
        self.keep_mcn(Some(&patched));
        Ok(patched)
    }
}
