//! The `MachineConfig` object (`machineconfiguration.openshift.io/v1`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::document::parse_value;
use crate::error::{Issue, ParseError};
use crate::ignition::{Config, ParsedConfig, SpecVersion, typed, unreachable_json};
use crate::ignition_json::{IgnitionJson, restore_sources};
use crate::source::SourceTable;

/// API group of the MCO's objects.
pub const GROUP: &str = "machineconfiguration.openshift.io";
/// `apiVersion` of MachineConfig, MachineConfigPool and MachineConfiguration objects.
pub const API_VERSION: &str = "machineconfiguration.openshift.io/v1";

/// `kernelType` values (the empty string means `default`).
pub const KERNEL_TYPE_DEFAULT: &str = "default";
pub const KERNEL_TYPE_REALTIME: &str = "realtime";
pub const KERNEL_TYPE_64K_PAGES: &str = "64k-pages";

/// Deserializes `null` as the type's default (Go marshals empty slices as `null`).
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A MachineConfig.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfig {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub spec: MachineConfigSpec,
}

/// `spec` of a MachineConfig.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigSpec {
    #[serde(rename = "osImageURL", default, deserialize_with = "nullable")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub os_image_url: String,
    #[serde(
        rename = "baseOSExtensionsContainerImage",
        default,
        deserialize_with = "nullable"
    )]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub base_os_extensions_container_image: String,
    /// The Ignition config as given (any supported spec), its sources shared; `None` when
    /// absent or `null`. Parse it with [`MachineConfig::ignition`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<IgnitionJson>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub kernel_arguments: Vec<String>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub kernel_type: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub extensions: Vec<String>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub fips: bool,
}

/// Checks `apiVersion` and `kind` of a Kubernetes-style object.
pub(crate) fn check_type_meta(value: &Value, kind: &str) -> Result<(), ParseError> {
    check_type_meta_of(value, API_VERSION, kind)
}

/// [`check_type_meta`] for a kind of another API group.
pub(crate) fn check_type_meta_of(
    value: &Value,
    api_version: &str,
    kind: &str,
) -> Result<(), ParseError> {
    let mut issues = Vec::new();
    match value.get("apiVersion").and_then(Value::as_str) {
        Some(v) if v == api_version => {}
        Some(other) => issues.push(Issue::new(
            "$.apiVersion",
            format!("expected {api_version:?}, got {other:?}"),
        )),
        None => issues.push(Issue::new(
            "$.apiVersion",
            format!("missing (expected {api_version:?})"),
        )),
    }
    match value.get("kind").and_then(Value::as_str) {
        Some(k) if k == kind => {}
        Some(other) => issues.push(Issue::new(
            "$.kind",
            format!("expected {kind:?}, got {other:?}"),
        )),
        None => issues.push(Issue::new("$.kind", format!("missing (expected {kind:?})"))),
    }
    if !value.is_object() {
        issues = vec![Issue::new("$", format!("a {kind} must be an object"))];
    }
    if issues.is_empty() {
        Ok(())
    } else {
        Err(ParseError::Invalid(issues))
    }
}

/// Refuses what no kernel command line (and no D-Bus string to rpm-ostree) can carry, so that
/// such a config fails when it is read, not in the middle of an update.
fn check_kernel_arguments(args: &[String]) -> Result<(), ParseError> {
    let issues: Vec<Issue> = args
        .iter()
        .enumerate()
        .filter(|(_, arg)| arg.contains('\0'))
        .map(|(i, _)| Issue::new(format!("$.spec.kernelArguments.{i}"), "contains a NUL byte"))
        .collect();
    if issues.is_empty() {
        Ok(())
    } else {
        Err(ParseError::Invalid(issues))
    }
}

impl MachineConfig {
    /// A MachineConfig with the given name and spec.
    pub fn new(name: impl Into<String>, spec: MachineConfigSpec) -> Self {
        MachineConfig {
            api_version: API_VERSION.to_string(),
            kind: "MachineConfig".to_string(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec,
        }
    }

    /// Parses a MachineConfig from YAML or JSON, including its Ignition config (errors in it are
    /// located under `$.spec.config`).
    pub fn from_slice(bytes: &[u8]) -> Result<Self, ParseError> {
        Self::from_value(parse_value(bytes)?)
    }

    /// Parses a MachineConfig from a decoded JSON value.
    pub fn from_value(value: Value) -> Result<Self, ParseError> {
        Self::from_value_parsed(value).map(|(mc, _)| mc)
    }

    /// [`Self::from_value`] that also returns the parsed Ignition config, so a caller that needs
    /// both parses a large config once, not twice.
    pub fn from_value_parsed(mut value: Value) -> Result<(Self, ParsedConfig), ParseError> {
        check_type_meta(&value, "MachineConfig")?;
        // The config's sources move into its table, not copied while the value is alive.
        let config = take_config(&mut value).map(IgnitionJson::from_value);
        Self::with_config(value, config)
    }

    /// A MachineConfig read by [`crate::ignition_json::parse_json_document`] or
    /// [`crate::ignition_json::parse_json_file`]: its config's sources stay spans of the
    /// document's text or file. Nothing of them is copied.
    pub fn from_document(
        mut value: Value,
        sources: SourceTable,
    ) -> Result<(Self, ParsedConfig), ParseError> {
        check_type_meta(&value, "MachineConfig")?;
        let config = take_config(&mut value).map(|c| IgnitionJson::from_parts(c, sources.clone()));
        restore_sources(&mut value, &sources)
            .map_err(|e| ParseError::Invalid(vec![Issue::new("$", e.to_string())]))?;
        Self::with_config(value, config)
    }

    fn with_config(
        value: Value,
        config: Option<IgnitionJson>,
    ) -> Result<(Self, ParsedConfig), ParseError> {
        let mut mc: MachineConfig = typed(value)?;
        check_kernel_arguments(&mc.spec.kernel_arguments)?;
        mc.spec.config = config;
        let parsed = mc.parsed_ignition()?;
        Ok((mc, parsed))
    }

    /// `metadata.name` (empty when unset).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The Ignition config in the internal form (an empty config when `spec.config` is absent).
    pub fn ignition(&self) -> Result<Config, ParseError> {
        self.parsed_ignition().map(|p| p.config)
    }

    /// The Ignition config with its declared version and warnings.
    pub fn parsed_ignition(&self) -> Result<ParsedConfig, ParseError> {
        match &self.spec.config {
            None => Ok(empty_parsed()),
            Some(c) if c.is_empty_object() => Ok(empty_parsed()),
            Some(c) => c.parse().map_err(|e| e.under("$.spec.config")),
        }
    }

    /// The spec version `spec.config` declares, if it declares a supported one.
    pub fn config_version(&self) -> Option<SpecVersion> {
        SpecVersion::parse(self.spec.config.as_ref()?.version()?).ok()
    }

    /// `spec.kernelType` with `""` read as `default`.
    pub fn kernel_type(&self) -> &str {
        canonical_kernel_type(&self.spec.kernel_type)
    }

    /// Serializes to compact JSON (what the agent stores as `currentconfig`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| unreachable_json(&e))
    }

    /// Serializes to indented JSON.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| unreachable_json(&e))
    }
}

/// Takes `spec.config` out of a MachineConfig's value (`null` is no config).
fn take_config(value: &mut Value) -> Option<Value> {
    let config = value.get_mut("spec")?.as_object_mut()?.remove("config")?;
    (!config.is_null()).then_some(config)
}

/// `""` → `default`; anything else unchanged.
pub fn canonical_kernel_type(k: &str) -> &str {
    if k.is_empty() { KERNEL_TYPE_DEFAULT } else { k }
}

fn empty_parsed() -> ParsedConfig {
    ParsedConfig {
        config: Config::empty(),
        source_version: SpecVersion::V3_5,
        warnings: Vec::new(),
    }
}

impl k8s_openapi::Resource for MachineConfig {
    const API_VERSION: &'static str = API_VERSION;
    const GROUP: &'static str = GROUP;
    const KIND: &'static str = "MachineConfig";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "machineconfigs";
    type Scope = k8s_openapi::ClusterResourceScope;
}

impl k8s_openapi::Metadata for MachineConfig {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
