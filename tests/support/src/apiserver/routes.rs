//! URL parsing: discovery endpoints and resource paths
//! (`/api/v1[/namespaces/<ns>]/<plural>[/<name>[/<subresource>]]`, same under `/apis/<g>/<v>`).

use super::registry::{RESOURCES, find};

#[derive(Debug, PartialEq)]
pub enum Route {
    Health,
    Version,
    CoreVersions,
    Groups,
    Group(String),
    GroupVersion(String, String),
    OpenApi,
    /// `/openapi/v2`: the one document of OpenAPI v2.
    OpenApiV2,
    /// `/openapi/v3` (None) or `/openapi/v3/<gv path>`.
    OpenApiV3(Option<String>),
    Resource(ResourcePath),
    NotFound,
}

#[derive(Debug, PartialEq, Clone)]
pub struct ResourcePath {
    pub res: usize,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

pub fn parse(path: &str) -> Route {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["version"] => Route::Version,
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3(None),
        ["openapi", "v3", rest @ ..] => Route::OpenApiV3(Some(rest.join("/"))),
        ["openapi", ..] => Route::OpenApi,
        ["api"] => Route::CoreVersions,
        ["api", version, rest @ ..] => resource(String::new(), version, rest),
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group(group.to_string()),
        ["apis", group, version, rest @ ..] => resource(group.to_string(), version, rest),
        _ => Route::NotFound,
    }
}

fn resource(group: String, version: &str, rest: &[&str]) -> Route {
    if rest.is_empty() {
        return Route::GroupVersion(group, version.to_string());
    }
    if let ["namespaces", ns, plural, tail @ ..] = rest
        && let Some(res) = find(&group, version, plural)
        && RESOURCES[res].namespaced
    {
        return item(res, Some(ns), tail);
    }
    let [plural, tail @ ..] = rest else {
        return Route::NotFound;
    };
    match find(&group, version, plural) {
        Some(res) if !RESOURCES[res].namespaced || tail.is_empty() => item(res, None, tail),
        _ => Route::NotFound,
    }
}

fn item(res: usize, namespace: Option<&str>, tail: &[&str]) -> Route {
    if tail.len() > 2 || tail.iter().any(|s| s.is_empty()) {
        return Route::NotFound;
    }
    Route::Resource(ResourcePath {
        res,
        namespace: namespace.map(String::from),
        name: tail.first().map(|s| s.to_string()),
        subresource: tail.get(1).map(|s| s.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::registry::index_of;

    fn res(plural: &str, ns: Option<&str>, name: Option<&str>, sub: Option<&str>) -> Route {
        Route::Resource(ResourcePath {
            res: index_of(plural),
            namespace: ns.map(String::from),
            name: name.map(String::from),
            subresource: sub.map(String::from),
        })
    }

    #[test]
    fn paths() {
        let cases = [
            ("/api", Route::CoreVersions),
            ("/api/v1", Route::GroupVersion(String::new(), "v1".into())),
            ("/apis", Route::Groups),
            ("/apis/policy", Route::Group("policy".into())),
            ("/version", Route::Version),
            ("/openapi/v2", Route::OpenApiV2),
            ("/openapi/v1", Route::OpenApi),
            ("/openapi/v3", Route::OpenApiV3(None)),
            (
                "/openapi/v3/apis/policy/v1",
                Route::OpenApiV3(Some("apis/policy/v1".into())),
            ),
            ("/api/v1/nodes", res("nodes", None, None, None)),
            ("/api/v1/nodes/n1", res("nodes", None, Some("n1"), None)),
            (
                "/api/v1/nodes/n1/status",
                res("nodes", None, Some("n1"), Some("status")),
            ),
            ("/api/v1/pods", res("pods", None, None, None)),
            ("/api/v1/pods/p", Route::NotFound),
            (
                "/api/v1/namespaces/a/pods",
                res("pods", Some("a"), None, None),
            ),
            (
                "/api/v1/namespaces/a/pods/p/eviction",
                res("pods", Some("a"), Some("p"), Some("eviction")),
            ),
            (
                "/api/v1/namespaces/a",
                res("namespaces", None, Some("a"), None),
            ),
            (
                "/api/v1/namespaces/a/status",
                res("namespaces", None, Some("a"), Some("status")),
            ),
            (
                "/apis/policy/v1/namespaces/a/poddisruptionbudgets/b",
                res("poddisruptionbudgets", Some("a"), Some("b"), None),
            ),
            (
                "/apis/machineconfiguration.openshift.io/v1/machineconfigpools/worker/status",
                res("machineconfigpools", None, Some("worker"), Some("status")),
            ),
            (
                "/apis/machineconfiguration.openshift.io/v1/namespaces/a/machineconfigs",
                Route::NotFound,
            ),
            ("/api/v1/replicationcontrollers", Route::NotFound),
            ("/nothing", Route::NotFound),
        ];
        for (path, want) in cases {
            assert_eq!(parse(path), want, "{path}");
        }
    }
}
