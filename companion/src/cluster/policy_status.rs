//! `MachineConfiguration/cluster`'s node disruption status, as the MCO's operator keeps it
//! where the MCO is absent: the object is created (empty spec) when missing, and its
//! `status.nodeDisruptionPolicyStatus.clusterPolicies` is the default table with
//! `spec.nodeDisruptionPolicy` merged in, `status.observedGeneration` the generation it was
//! computed from. Agents plan with that status once it is current.

use anyhow::{Context, Result};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use machine_config::MachineConfiguration;
use machine_config::machineconfiguration::{CLUSTER_NAME, OPERATOR_API_VERSION};
use serde_json::json;

/// Brings the status up to date (creating the object first if there is none). Returns whether
/// anything was written.
pub async fn sync(api: &Api<MachineConfiguration>) -> Result<bool> {
    let object = match api
        .get_opt(CLUSTER_NAME)
        .await
        .with_context(|| format!("reading MachineConfiguration/{CLUSTER_NAME}"))?
    {
        Some(object) => object,
        None => {
            // Written as JSON: the model keeps only the fields the agent reads.
            let resource = ApiResource::erase::<MachineConfiguration>(&());
            let dynamic: Api<DynamicObject> = Api::all_with(api.clone().into_client(), &resource);
            let empty: DynamicObject = serde_json::from_value(json!({
                "apiVersion": OPERATOR_API_VERSION, "kind": "MachineConfiguration",
                "metadata": {"name": CLUSTER_NAME},
                "spec": {"managementState": "Managed"}
            }))
            .context("building MachineConfiguration/cluster")?;
            tracing::info!("creating MachineConfiguration/{CLUSTER_NAME}");
            dynamic
                .create(&PostParams::default(), &empty)
                .await
                .with_context(|| format!("creating MachineConfiguration/{CLUSTER_NAME}"))?;
            api.get(CLUSTER_NAME)
                .await
                .with_context(|| format!("reading MachineConfiguration/{CLUSTER_NAME}"))?
        }
    };
    let computed = object.computed_policy_status();
    if object.status == computed {
        return Ok(false);
    }
    let patch = Patch::Merge(json!({ "status": computed }));
    api.patch_status(CLUSTER_NAME, &PatchParams::default(), &patch)
        .await
        .with_context(|| format!("writing the status of MachineConfiguration/{CLUSTER_NAME}"))?;
    tracing::info!(
        generation = computed.observed_generation,
        "MachineConfiguration/{CLUSTER_NAME}: node disruption policy status updated"
    );
    Ok(true)
}
