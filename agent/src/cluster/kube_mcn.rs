//! The MachineConfigNode calls of [`KubeNodeApi`]: the node's own object, read, created and
//! merge-patched (status through its subresource), each retried through transient failures.
//!
//! The agent is its MachineConfigNode's only writer, so the object as its last write left it
//! (the API's answer to the create or patch) is what a read would return: a read answers from
//! that, and only the first read, or the first after a write failed, goes to the API (it used
//! to be one read before each of the ten writes of an update). A failed write forgets the
//! answer: the object may have changed or gone (a 404 when it was deleted), and the next step
//! reads it afresh, as before. Merge patches carry no resourceVersion, so there is no conflict
//! to lose to.

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

use super::error::ClusterError;
use super::kube_node::KubeNodeApi;
use super::retry::with_retry;

impl KubeNodeApi {
    fn machine_config_nodes(&self) -> Api<DynamicObject> {
        let gvk =
            GroupVersionKind::gvk(machine_config::machineconfig::GROUP, "v1", super::mcn::KIND);
        Api::all_with(self.client.clone(), &ApiResource::from_gvk(&gvk))
    }

    fn invalid(&self, action: &str, e: serde_json::Error) -> ClusterError {
        ClusterError::Client {
            action: action.to_string(),
            message: e.to_string(),
        }
    }

    /// The last write's answer, or the object read from the API.
    pub(super) async fn get_mcn(&self) -> Result<Option<Value>, ClusterError> {
        if let Some(known) = self.known_mcn().clone() {
            return Ok(Some(known));
        }
        let api = self.machine_config_nodes();
        let action = format!("reading machineconfignode {}", self.node);
        let found = with_retry(&self.retry, &action, || api.get_opt(&self.node)).await?;
        let found = found
            .map(|o| serde_json::to_value(o).map_err(|e| self.invalid(&action, e)))
            .transpose()?;
        *self.known_mcn() = found.clone();
        Ok(found)
    }

    fn known_mcn(&self) -> std::sync::MutexGuard<'_, Option<Value>> {
        self.mcn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a write's answer as the object, or forgets the object when the write failed.
    fn remember_mcn(&self, written: Result<Value, ClusterError>) -> Result<Value, ClusterError> {
        *self.known_mcn() = written.as_ref().ok().cloned();
        written
    }

    pub(super) async fn create_mcn(&self, object: &Value) -> Result<Value, ClusterError> {
        let api = self.machine_config_nodes();
        let action = format!("creating machineconfignode {}", self.node);
        let object: DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| self.invalid(&action, e))?;
        let params = PostParams::default();
        let created = with_retry(&self.retry, &action, || api.create(&params, &object)).await;
        self.remember_mcn(
            created.and_then(|o| serde_json::to_value(o).map_err(|e| self.invalid(&action, e))),
        )
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
        self.remember_mcn(
            patched.and_then(|o| serde_json::to_value(o).map_err(|e| self.invalid(&action, e))),
        )
    }
}
