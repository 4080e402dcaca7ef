//! What a request asks to do, as the API server's RequestInfoFactory derives it from the URL
//! alone (so an unserved resource is still named correctly in a 403): the verb (get, list,
//! watch, create, update, patch, delete, deletecollection), the API group, resource,
//! subresource, namespace and name, or the path of a non-resource request. A list or watch
//! with a `metadata.name=X` field selector is about the object X.

use serde::Serialize;

/// A request's authorization attributes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attributes {
    pub verb: String,
    /// True for `/api/v1/...` and `/apis/<group>/<version>/...` paths naming a resource.
    pub resource_request: bool,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The URL path (what a non-resource rule matches).
    pub path: String,
    /// Field selector requirements `field=value` of a list or watch.
    #[serde(skip)]
    pub field_equals: Vec<(String, String)>,
}

impl Attributes {
    /// `resource/subresource`, or the resource alone.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }

    /// The value a field selector requires with `=` or `==`.
    pub fn field_equal(&self, field: &str) -> Option<&str> {
        self.field_equals
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| v.as_str())
    }

    /// Attributes of a resource request made in code (access reviews, tests).
    pub fn resource(verb: &str, group: &str, resource: &str, namespace: &str, name: &str) -> Self {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        Self {
            verb: verb.to_string(),
            resource_request: true,
            group: group.to_string(),
            version: String::new(),
            resource: resource.to_string(),
            subresource: subresource.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            path: String::new(),
            field_equals: Vec::new(),
        }
    }

    /// Attributes of a non-resource request.
    pub fn non_resource(verb: &str, path: &str) -> Self {
        Self {
            verb: verb.to_string(),
            resource_request: false,
            group: String::new(),
            version: String::new(),
            resource: String::new(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
            path: path.to_string(),
            field_equals: Vec::new(),
        }
    }
}

/// The verb of a non-resource request (the lowercase HTTP method, as the API server uses it).
fn non_resource_verb(method: &str) -> String {
    method.to_ascii_lowercase()
}

/// Derives the attributes of `method path?query`.
pub fn from_request(method: &str, path: &str, query: &[(String, String)]) -> Attributes {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, mut rest) = match parts.as_slice() {
        ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest.to_vec()),
        ["apis", group, version, rest @ ..] if !rest.is_empty() => {
            (*group, *version, rest.to_vec())
        }
        _ => return Attributes::non_resource(&non_resource_verb(method), path),
    };
    let get = |key: &str| {
        query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let mut verb = match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "",
    }
    .to_string();
    // The old `/watch/` path prefix.
    if rest.first() == Some(&"watch") {
        rest.remove(0);
        verb = "watch".into();
    }
    let mut namespace = String::new();
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        namespace = rest[1].to_string();
        // `/namespaces/<ns>` and its subresources are about the namespace itself.
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest.drain(..2);
        }
    }
    let resource = rest.first().copied().unwrap_or_default().to_string();
    let name = rest.get(1).copied().unwrap_or_default().to_string();
    let subresource = rest.get(2).copied().unwrap_or_default().to_string();
    let mut attrs = Attributes {
        verb,
        resource_request: true,
        group: group.to_string(),
        version: version.to_string(),
        resource,
        subresource,
        namespace,
        name,
        path: path.to_string(),
        field_equals: Vec::new(),
    };
    if attrs.name.is_empty() {
        match attrs.verb.as_str() {
            "get" if get("watch").is_some_and(|w| w == "true" || w == "1") => {
                attrs.verb = "watch".into()
            }
            "get" => attrs.verb = "list".into(),
            "delete" => attrs.verb = "deletecollection".into(),
            _ => {}
        }
    }
    if matches!(attrs.verb.as_str(), "list" | "watch") {
        attrs.field_equals = field_equals(get("fieldSelector").unwrap_or_default());
        if attrs.name.is_empty()
            && let Some(name) = attrs.field_equal("metadata.name")
            && !name.is_empty()
            && !name.contains('/')
        {
            attrs.name = name.to_string();
        }
    }
    attrs
}

/// The `field=value` and `field==value` terms of a field selector.
fn field_equals(selector: &str) -> Vec<(String, String)> {
    selector
        .split(',')
        .filter(|term| !term.contains("!="))
        .filter_map(|term| {
            term.split_once("==")
                .or_else(|| term.split_once('='))
                .map(|(f, v)| (f.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: &str, path: &str, query: &[(&str, &str)]) -> Attributes {
        let query: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        from_request(method, path, &query)
    }

    fn summary(a: &Attributes) -> String {
        format!(
            "{} {}|{}|{}|{}|{}",
            a.verb,
            a.group,
            a.combined_resource(),
            a.namespace,
            a.name,
            a.resource_request
        )
    }

    #[test]
    fn request_info_as_the_api_server_derives_it() {
        let cases = [
            ("GET", "/api/v1/nodes", vec![], "list |nodes|||true"),
            (
                "GET",
                "/api/v1/nodes",
                vec![("watch", "true")],
                "watch |nodes|||true",
            ),
            (
                "GET",
                "/api/v1/nodes",
                vec![("fieldSelector", "metadata.name=n1")],
                "list |nodes||n1|true",
            ),
            (
                "PATCH",
                "/api/v1/nodes/n1/status",
                vec![],
                "patch |nodes/status||n1|true",
            ),
            (
                "POST",
                "/api/v1/namespaces/a/pods/p/eviction",
                vec![],
                "create |pods/eviction|a|p|true",
            ),
            (
                "DELETE",
                "/api/v1/namespaces/a/pods",
                vec![],
                "deletecollection |pods|a||true",
            ),
            (
                "GET",
                "/api/v1/namespaces/a",
                vec![],
                "get |namespaces|a|a|true",
            ),
            (
                "PUT",
                "/api/v1/namespaces/a/status",
                vec![],
                "update |namespaces/status|a|a|true",
            ),
            (
                "GET",
                "/apis/machineconfiguration.openshift.io/v1/machineconfigs/m",
                vec![],
                "get machineconfiguration.openshift.io|machineconfigs||m|true",
            ),
            (
                "GET",
                "/api/v1/namespaces/a/secrets/s",
                vec![],
                "get |secrets|a|s|true",
            ),
            ("GET", "/apis/policy/v1", vec![], "get ||||false"),
            ("GET", "/api", vec![], "get ||||false"),
            ("GET", "/healthz", vec![], "get ||||false"),
        ];
        for (method, path, query, want) in cases {
            assert_eq!(
                summary(&attrs(method, path, &query)),
                want,
                "{method} {path}"
            );
        }
        let pods = attrs(
            "GET",
            "/api/v1/pods",
            &[("fieldSelector", "spec.nodeName=n1,status.phase!=Succeeded")],
        );
        assert_eq!(pods.field_equal("spec.nodeName"), Some("n1"));
        assert_eq!(pods.field_equal("status.phase"), None);
        assert_eq!(attrs("GET", "/version", &[]).path, "/version");
    }
}
