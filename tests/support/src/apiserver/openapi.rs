//! A minimal OpenAPI v3 surface: the `/openapi/v3` root and one document per group-version
//! listing each resource's item path with its PATCH operation (group-version-kind extension)
//! and the `fieldValidation` parameter; reviews get their collection path and POST. kubectl
//! reads exactly this to learn that the server validates fields itself, and then skips
//! client-side schema validation (which would need the full schemas). No schemas are served;
//! `fieldValidation` is accepted and not enforced.

use serde_json::{Map, Value, json};

use super::registry::{RESOURCES, ResourceDef};

fn gv_path(def: &ResourceDef) -> String {
    def.prefix().trim_start_matches('/').to_string()
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
