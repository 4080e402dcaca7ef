//! Per-node configuration, which the MCO lacks: MachineConfigs labelled [`NODE_LABEL`] belong to
//! one node and are rendered on top of its pool's rendered config.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;

use super::{
    RenderError, RenderOptions, Rendered, merge_specs, rendered_config, rendered_name, source_refs,
    spec_value,
};
use crate::machineconfig::{API_VERSION, MachineConfig};
use crate::pool::MachineConfigPool;

/// Label that ties a MachineConfig to one node (the companion's per-node configuration).
pub const NODE_LABEL: &str = "mco.io/node";
/// Label on a per-node rendered config naming its node.
pub const RENDERED_FOR_NODE_LABEL: &str = "mco.io/rendered-for-node";
/// Annotation on a per-node rendered config naming the pool's rendered config it layers on.
pub const BASE_CONFIG_ANNOTATION: &str = "mco.io/base-config";

/// The per-node MachineConfigs of `node`, sorted by name.
pub fn select_for_node<'a>(node: &str, configs: &'a [MachineConfig]) -> Vec<&'a MachineConfig> {
    let mut selected: Vec<&MachineConfig> = configs
        .iter()
        .filter(|mc| node_of(mc) == Some(node))
        .collect();
    selected.sort_by(|a, b| a.name().cmp(b.name()));
    selected
}

/// The node a MachineConfig is labelled for, if any.
pub fn node_of(mc: &MachineConfig) -> Option<&str> {
    mc.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODE_LABEL))
        .map(String::as_str)
}

/// Renders `node`'s own config: its MachineConfigs (labelled [`NODE_LABEL`]` = node`, by name)
/// merged over `base`, the pool's rendered config, with the same rules. `None` when the node has
/// no MachineConfigs of its own (it gets `base`). The name is `rendered-<pool>-<node>-<hash>`.
///
/// Layering on the rendered config (rather than re-merging the pool's sources) means the config
/// server and the controller derive the same per-node config from whatever rendered config the
/// pool currently serves, even while the pool's sources have moved on.
pub fn render_node(
    pool: &MachineConfigPool,
    base: &MachineConfig,
    node: &str,
    configs: &[MachineConfig],
) -> Result<Option<Rendered>, RenderError> {
    let own = select_for_node(node, configs);
    if own.is_empty() {
        return Ok(None);
    }
    // the base is a generated config: its images come in as the options, user configs may override
    let options = RenderOptions {
        os_image_url: base.spec.os_image_url.clone(),
        base_os_extensions_container_image: base.spec.base_os_extensions_container_image.clone(),
    };
    let mut layers = vec![base];
    layers.extend(own.iter().copied());
    let spec = merge_specs(
        &layers,
        &options,
        &format!("node {node} in pool {}", pool.name()),
    )?;
    let name = rendered_name(&format!("{}-{node}", pool.name()), &spec_value(&spec));
    let mut config = rendered_config(name, spec, pool);
    let labels = config.metadata.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(RENDERED_FOR_NODE_LABEL.to_string(), node.to_string());
    config
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(BASE_CONFIG_ANNOTATION.to_string(), base.name().to_string());
    let mut sources = vec![ObjectReference {
        api_version: Some(API_VERSION.to_string()),
        kind: Some("MachineConfig".to_string()),
        name: Some(base.name().to_string()),
        ..ObjectReference::default()
    }];
    sources.extend(source_refs(&own));
    Ok(Some(Rendered { config, sources }))
}
