//! A minimal OpenAPI v3 surface: the `/openapi/v3` root and one document per group-version
//! listing each resource's item path with its PATCH operation (group-version-kind extension)
//! and the `fieldValidation` parameter; reviews get their collection path and POST. kubectl
//! reads exactly this to learn that the server validates fields itself, and then skips
//! client-side schema validation (which would need the full schemas). No schemas are served;
//! `fieldValidation` is accepted and not enforced.
//!
//! kubectl asks `/openapi/v2` (protobuf) for the kinds whose v3 document has no PATCH
//! operation (reviews: it validates them on the client): the v2 document is served without
//! definitions, so kubectl finds no schema and leaves validation to the server, as it does for
//! every other kind here.

use serde_json::{Map, Value, json};

use super::registry::{RESOURCES, ResourceDef};

fn gv_path(def: &ResourceDef) -> String {
    def.prefix().trim_start_matches('/').to_string()
}

/// The content type of the protobuf OpenAPI v2 document.
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// `/openapi/v2` in protobuf (gnostic's `openapi_v2.Document`): `swagger: "2.0"` and the
/// `info` block, no paths and no definitions.
pub fn v2_document() -> Vec<u8> {
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(number << 3) | 2, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }
    let info = [field(1, b"Kubernetes"), field(2, b"v1.33.0")].concat();
    [field(1, b"2.0"), field(2, &info)].concat()
}

/// `/openapi/v3`: the group-versions and where their documents are.
pub fn root() -> Value {
    let mut paths = Map::new();
    for def in RESOURCES {
        let gv = gv_path(def);
        paths.insert(
            gv.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash=0")}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/<api/v1 | apis/g/v>`, or None for an unknown group-version.
pub fn group_version(gv: &str) -> Option<Value> {
    let defs: Vec<&ResourceDef> = RESOURCES.iter().filter(|d| gv_path(d) == gv).collect();
    if defs.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for def in defs {
        let item = if def.namespaced {
            format!(
                "{}/namespaces/{{namespace}}/{}/{{name}}",
                def.prefix(),
                def.plural
            )
        } else {
            format!("{}/{}/{{name}}", def.prefix(), def.plural)
        };
        let gvk = json!({"group": def.group, "version": def.version, "kind": def.kind});
        if def.review {
            // Reviews are only created, on their collection path.
            let operation = json!({
                "operationId": format!("create{}", def.kind),
                "x-kubernetes-action": "post",
                "x-kubernetes-group-version-kind": gvk,
                "responses": {"201": {"description": "Created"}},
            });
            paths.insert(
                format!("{}/{}", def.prefix(), def.plural),
                json!({"post": operation}),
            );
            continue;
        }
        // The operations list their query parameters (kubectl looks there).
        let operation = |action: &str| {
            json!({
                "operationId": format!("{action}{}", def.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [
                    {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {"200": {"description": "OK"}},
            })
        };
        paths.insert(
            item,
            json!({
                "parameters": [
                    {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}},
                ],
                "get": operation("get"),
                "put": operation("put"),
                "patch": operation("patch"),
                "delete": operation("delete"),
            }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_points_at_documents_that_exist() {
        let root = root();
        for (gv, entry) in root["paths"].as_object().unwrap() {
            assert!(
                entry["serverRelativeURL"]
                    .as_str()
                    .unwrap()
                    .starts_with("/openapi/v3/")
            );
            let doc = group_version(gv).unwrap();
            assert!(!doc["paths"].as_object().unwrap().is_empty());
        }
        let doc = group_version("apis/machineconfiguration.openshift.io/v1").unwrap();
        let mc = &doc["paths"]["/apis/machineconfiguration.openshift.io/v1/machineconfigs/{name}"];
        assert_eq!(
            mc["patch"]["x-kubernetes-group-version-kind"]["kind"],
            "MachineConfig"
        );
        assert!(group_version("apis/nope/v1").is_none());
        let reviews = group_version("apis/authorization.k8s.io/v1").unwrap();
        let ssar = &reviews["paths"]["/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"];
        assert_eq!(ssar["post"]["x-kubernetes-action"], "post");
        assert!(ssar.get("get").is_none());
    }
}
