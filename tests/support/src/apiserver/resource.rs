//! The resource verbs: get, list (selectors, pagination, tables), watch, create, update,
//! patch, delete, deletecollection and the eviction subresource.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, StreamBody};
use hyper::body::Bytes;
use hyper::{Method, Response, header};
use serde_json::{Value, json};

use super::ServerState;
use super::admission::{self, AdmissionRequest};
use super::authz::AuthorizationMode;
use super::handler::{Body, json_response};
use super::identity::Identity;
use super::patch::PatchType;
use super::registry::RESOURCES;
use super::routes::ResourcePath;
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::DeleteOptions;
use super::strategy::{Target, name_of, namespace_of};
use super::table;
use super::watch::{self, WatchRequest};
use super::writes::Write;
use super::{protobuf, reviews};

/// Query parameters, form-decoded.
pub(super) struct Query(Vec<(String, String)>);

impl Query {
    pub(super) fn parse(raw: &str) -> Self {
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(&s.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        };
        Self(
            raw.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (decode(k), decode(v)),
                    None => (decode(p), String::new()),
                })
                .collect(),
        )
    }

    pub(super) fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true") | Some("1"))
    }

    fn dry_run(&self) -> bool {
        self.get("dryRun").is_some_and(|v| v == "All")
    }
}

pub(super) struct Call<'a> {
    pub(super) state: &'a Arc<ServerState>,
    /// Who the request is served as (after impersonation).
    pub(super) who: &'a Identity,
    pub(super) rp: ResourcePath,
    pub(super) query: Query,
    pub(super) body: Bytes,
    pub(super) content_type: String,
    pub(super) accept: String,
}

impl Call<'_> {
    pub(super) async fn dispatch(self, method: &Method) -> Result<Response<Body>, ApiError> {
        let def = &RESOURCES[self.rp.res];
        let target = match self.rp.subresource.as_deref() {
            None => Target::Main,
            Some("status") if def.status_subresource => Target::Status,
            Some("eviction") if def.plural == "pods" && method == Method::POST => Target::Main,
            Some(_) => {
                return Err(ApiError::new(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                ));
            }
        };
        let store = &self.state.store;
        let ns = self.rp.namespace.as_deref();
        if def.review {
            return match (method, &self.rp.name) {
                (&Method::POST, None) => {
                    let body = if self.content_type.starts_with(protobuf::CONTENT_TYPE) {
                        protobuf::decode_review(def.kind, &self.body)?
                    } else {
                        self.json_body()?
                    };
                    let reviewer = reviews::Reviewer {
                        mode: self.state.authorization,
                        store,
                        authn: &self.state.authn,
                    };
                    let review = reviews::answer(def, &reviewer, self.who, body)?;
                    Ok(json_response(201, &review))
                }
                _ => Err(ApiError::method_not_allowed(format!(
                    "{method} is not supported on {}",
                    def.plural
                ))),
            };
        }
        let node_restriction = |request: &AdmissionRequest| {
            if self.state.authorization == AuthorizationMode::NodeRbac {
                admission::node_restriction(self.who, request)
            } else {
                Ok(())
            }
        };
        let write = Write {
            target,
            dry_run: self.query.dry_run(),
            admit: &node_restriction,
        };
        match (method.clone(), self.rp.name.clone()) {
            (Method::GET, None) if self.query.flag("watch") => self.watch(),
            (Method::GET, None) => self.list(),
            (Method::GET, Some(name)) => {
                let obj = store.get(self.rp.res, ns, &name)?;
                if table::wants_table(&self.accept) {
                    let meta = json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
                    return Ok(json_response(
                        200,
                        &table::render(
                            def,
                            &[obj],
                            meta,
                            self.query.get("includeObject").unwrap_or("Metadata"),
                        ),
                    ));
                }
                Ok(json_response(200, &obj))
            }
            (Method::POST, None) => {
                let obj = store.create(self.rp.res, ns, self.json_body()?, &write)?;
                Ok(json_response(201, &obj))
            }
            (Method::POST, Some(name)) if self.rp.subresource.as_deref() == Some("eviction") => {
                let eviction = self.json_body()?;
                let status =
                    store.evict(ns.unwrap_or_default(), &name, &eviction, &node_restriction)?;
                Ok(json_response(201, &status))
            }
            (Method::PUT, Some(name)) => {
                let existed = store.get(self.rp.res, ns, &name).is_ok();
                let obj = store.replace(self.rp.res, ns, &name, self.json_body()?, &write)?;
                // A PUT that created the object (leases, events, RBAC) answers 201.
                Ok(json_response(if existed { 200 } else { 201 }, &obj))
            }
            (Method::PATCH, Some(name)) => {
                let patch_type = PatchType::from_content_type(&self.content_type)
                    .ok_or_else(|| ApiError::unsupported_media_type(&self.content_type))?;
                if patch_type == PatchType::Apply {
                    return Err(ApiError::unsupported_media_type(
                        "application/apply-patch+yaml (server-side apply is not implemented by this test server)",
                    ));
                }
                let body = self.json_body()?;
                let obj = store.patch(self.rp.res, ns, &name, patch_type, &body, &write)?;
                Ok(json_response(200, &obj))
            }
            (Method::DELETE, Some(name)) => {
                let (opts, body_dry) = self.delete_options()?;
                let write = Write {
                    dry_run: write.dry_run || body_dry,
                    ..write
                };
                let obj = store.delete(self.rp.res, ns, &name, &opts, &write)?;
                Ok(json_response(200, &obj))
            }
            (Method::DELETE, None) => self.delete_collection(&write),
            _ => Err(ApiError::method_not_allowed(format!(
                "{method} is not supported on this path"
            ))),
        }
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        let essence = self.content_type.split(';').next().unwrap_or("").trim();
        if !essence.ends_with("json") {
            return Err(ApiError::unsupported_media_type(&self.content_type));
        }
        serde_json::from_slice(&self.body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
    }

    fn delete_options(&self) -> Result<(DeleteOptions, bool), ApiError> {
        let body: Value = if self.body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            self.json_body()?
        };
        let grace = self
            .query
            .get("gracePeriodSeconds")
            .and_then(|g| g.parse().ok())
            .or_else(|| body.get("gracePeriodSeconds").and_then(Value::as_i64));
        let opts = DeleteOptions {
            grace_period_seconds: grace,
            precondition_uid: body
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(String::from),
            precondition_rv: body
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(String::from),
        };
        let dry = body
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| !d.is_empty());
        Ok((opts, dry))
    }

    fn selectors(&self) -> Result<(LabelSelector, FieldSelector), ApiError> {
        let def = &RESOURCES[self.rp.res];
        Ok((
            LabelSelector::parse(self.query.get("labelSelector").unwrap_or_default())?,
            FieldSelector::parse(self.query.get("fieldSelector").unwrap_or_default(), def)?,
        ))
    }

    fn list(&self) -> Result<Response<Body>, ApiError> {
        let def = &RESOURCES[self.rp.res];
        let (labels, fields) = self.selectors()?;
        let (mut items, rv) =
            self.state
                .store
                .list(self.rp.res, self.rp.namespace.as_deref(), &labels, &fields);
        let mut meta = json!({"resourceVersion": rv.to_string()});
        // Continue tokens are "<rv of the first page>/<namespace>/<name of the last item>".
        if let Some(token) = self.query.get("continue").filter(|t| !t.is_empty()) {
            let mut parts = token.splitn(3, '/');
            let (Some(first_rv), Some(after_ns), Some(after_name)) =
                (parts.next(), parts.next(), parts.next())
            else {
                return Err(ApiError::bad_request(format!(
                    "invalid continue token {token:?}"
                )));
            };
            meta["resourceVersion"] = json!(first_rv);
            let after = (after_ns.to_string(), after_name.to_string());
            items.retain(|o| (namespace_of(o).to_string(), name_of(o).to_string()) > after);
        }
        let limit: usize = self
            .query
            .get("limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        if limit > 0 && items.len() > limit {
            let remaining = items.len() - limit;
            items.truncate(limit);
            let last = &items[limit - 1];
            let first_rv = meta["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            meta["continue"] = json!(format!(
                "{first_rv}/{}/{}",
                namespace_of(last),
                name_of(last)
            ));
            meta["remainingItemCount"] = json!(remaining);
        }
        if table::wants_table(&self.accept) {
            return Ok(json_response(
                200,
                &table::render(
                    def,
                    &items,
                    meta,
                    self.query.get("includeObject").unwrap_or("Metadata"),
                ),
            ));
        }
        Ok(json_response(
            200,
            &json!({
                "kind": def.list_kind(),
                "apiVersion": def.api_version(),
                "metadata": meta,
                "items": items,
            }),
        ))
    }

    fn delete_collection(&self, write: &Write) -> Result<Response<Body>, ApiError> {
        let def = &RESOURCES[self.rp.res];
        let (labels, fields) = self.selectors()?;
        let (items, _) =
            self.state
                .store
                .list(self.rp.res, self.rp.namespace.as_deref(), &labels, &fields);
        let (opts, body_dry) = self.delete_options()?;
        let mut deleted = Vec::new();
        for item in items {
            let ns = namespace_of(&item).to_string();
            let name = name_of(&item).to_string();
            let ns = def.namespaced.then_some(ns.as_str());
            let write = Write {
                dry_run: write.dry_run || body_dry,
                target: write.target,
                admit: write.admit,
            };
            match self
                .state
                .store
                .delete(self.rp.res, ns, &name, &opts, &write)
            {
                Ok(obj) => deleted.push(obj),
                Err(err) if err.code == 404 => {}
                Err(err) => return Err(err),
            }
        }
        Ok(json_response(
            200,
            &json!({
                "kind": def.list_kind(),
                "apiVersion": def.api_version(),
                "metadata": {"resourceVersion": self.state.store.current_rv().to_string()},
                "items": deleted,
            }),
        ))
    }

    fn watch(&self) -> Result<Response<Body>, ApiError> {
        let (labels, fields) = self.selectors()?;
        let from =
            match self.query.get("resourceVersion").unwrap_or_default() {
                "" | "0" => None,
                rv => Some(rv.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                })?),
            };
        let req = WatchRequest {
            res: self.rp.res,
            namespace: self.rp.namespace.clone(),
            labels,
            fields,
            from,
            bookmarks: self.query.flag("allowWatchBookmarks"),
            send_initial_events: self.query.flag("sendInitialEvents"),
            timeout: self
                .query
                .get("timeoutSeconds")
                .and_then(|t| t.parse().ok())
                .map(Duration::from_secs),
            bookmark_interval: self.state.bookmark_interval,
        };
        let (tx, rx) = futures::channel::mpsc::channel(64);
        tokio::spawn(watch::run(
            self.state.store.clone(),
            req,
            tx,
            self.state.faults.watch_generation(),
        ));
        let mut response = Response::new(StreamBody::new(rx).boxed());
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-cache, private"),
        );
        Ok(response)
    }
}
