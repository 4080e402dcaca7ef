//! Deletion and its side effects: graceful pod termination, finalizers, namespace contents,
//! evictions against PodDisruptionBudgets and the budgets' status.

use std::sync::Arc;

use serde_json::{Value, json};

use super::admission::{AdmissionRequest, Admit, Operation};
use super::disruption;
use super::registry::{RESOURCES, ResourceDef, index_of};
use super::status::ApiError;
use super::store::{DeleteOptions, EventKind, Inner, Store, key, obj_key};
use super::strategy::{has_finalizers, metadata_mut, namespace_of, now_rfc3339, str_at};
use super::writes::Write;

impl Store {
    /// Recomputes the status of every PodDisruptionBudget in `ns`, writing those that changed.
    pub(super) fn refresh_budgets(&self, inner: &mut Inner, ns: &str) {
        let pdb_res = index_of("poddisruptionbudgets");
        let pods: Vec<Value> = inner.objects[index_of("pods")]
            .iter()
            .filter(|((k_ns, _), _)| k_ns == ns)
            .map(|(_, v)| v.clone())
            .collect();
        let pod_refs: Vec<&Value> = pods.iter().collect();
        let pdbs: Vec<Value> = inner.objects[pdb_res]
            .iter()
            .filter(|((k_ns, _), _)| k_ns == ns)
            .map(|(_, v)| v.clone())
            .collect();
        let now = now_rfc3339();
        for pdb in pdbs {
            let status = disruption::pdb_status(&pdb, &pod_refs, &now);
            if pdb.get("status") != Some(&status) {
                let mut updated = pdb.clone();
                updated["status"] = status;
                self.commit(inner, pdb_res, EventKind::Modified, updated, Some(pdb));
            }
        }
    }

    /// DELETE: immediate, or graceful for scheduled running pods, or pending finalizers.
    pub fn delete(
        self: &Arc<Self>,
        res: usize,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
        write: &Write,
    ) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        self.delete_locked(&mut inner, res, ns, name, opts, write)
    }

    fn delete_locked(
        self: &Arc<Self>,
        inner: &mut Inner,
        res: usize,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
        write: &Write,
    ) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        let obj = inner.objects[res]
            .get(&key(def, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(def, name))?;
        if let Some(uid) = &opts.precondition_uid
            && str_at(&obj, "/metadata/uid") != Some(uid.as_str())
        {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    def.qualified_name(),
                    str_at(&obj, "/metadata/uid").unwrap_or_default()
                ),
            ));
        }
        if let Some(rv) = &opts.precondition_rv
            && str_at(&obj, "/metadata/resourceVersion") != Some(rv.as_str())
        {
            return Err(ApiError::conflict(def, name));
        }
        write.admit(&AdmissionRequest {
            operation: Operation::Delete,
            def,
            subresource: "",
            namespace: namespace_of(&obj),
            old: Some(&obj),
            new: None,
        })?;
        if write.dry_run {
            return Ok(obj);
        }
        let obj_ns = namespace_of(&obj).to_string();
        let grace = self.grace_period(inner, def, &obj, opts);
        if grace > 0 || has_finalizers(&obj) {
            if obj.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(obj);
            }
            let mut marked = obj.clone();
            let meta = metadata_mut(&mut marked);
            meta.insert("deletionTimestamp".into(), json!(now_rfc3339()));
            meta.insert("deletionGracePeriodSeconds".into(), json!(grace.max(0)));
            let marked = self.commit(inner, res, EventKind::Modified, marked, Some(obj));
            if grace > 0 {
                self.schedule_termination(inner, res, &marked);
            }
            if def.plural == "pods" {
                self.refresh_budgets(inner, &obj_ns);
            }
            return Ok(marked);
        }
        let deleted = self.commit(inner, res, EventKind::Deleted, obj.clone(), None);
        match def.plural {
            "pods" => self.refresh_budgets(inner, &obj_ns),
            "namespaces" => self.delete_namespace_contents(inner, name),
            _ => {}
        }
        Ok(deleted)
    }

    /// The grace period a deletion gets: only scheduled, unfinished pods terminate gracefully,
    /// and only when the server simulates a termination delay.
    fn grace_period(
        &self,
        inner: &Inner,
        def: &ResourceDef,
        obj: &Value,
        opts: &DeleteOptions,
    ) -> i64 {
        if def.plural != "pods"
            || inner.pod_termination_delay.is_zero()
            || str_at(obj, "/spec/nodeName").unwrap_or_default().is_empty()
            || disruption::pod_finished(obj)
        {
            return 0;
        }
        opts.grace_period_seconds
            .or_else(|| {
                obj.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30)
    }

    fn schedule_termination(self: &Arc<Self>, inner: &mut Inner, res: usize, pod: &Value) {
        let uid = str_at(pod, "/metadata/uid").unwrap_or_default().to_string();
        inner.terminating.insert(uid.clone());
        let delay = inner.pod_termination_delay;
        let (ns, name) = obj_key(pod);
        let store = Arc::clone(self);
        let runtime = self
            .runtime
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let finish = move || store.finish_termination(res, &ns, &name, &uid);
        match runtime {
            Some(handle) => {
                handle.spawn(async move {
                    tokio::time::sleep(delay).await;
                    finish();
                });
            }
            None => {
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    finish();
                });
            }
        }
    }

    /// The simulated kubelet is done with the pod: remove it unless finalizers hold it.
    fn finish_termination(&self, res: usize, ns: &str, name: &str, uid: &str) {
        let mut inner = self.lock();
        inner.terminating.remove(uid);
        let def = &RESOURCES[res];
        let Some(obj) = inner.objects[res].get(&key(def, Some(ns), name)).cloned() else {
            return;
        };
        if str_at(&obj, "/metadata/uid") == Some(uid) && !has_finalizers(&obj) {
            self.commit(&mut inner, res, EventKind::Deleted, obj, None);
            self.refresh_budgets(&mut inner, ns);
        }
    }

    fn delete_namespace_contents(&self, inner: &mut Inner, ns: &str) {
        for res in (0..RESOURCES.len()).filter(|r| RESOURCES[*r].namespaced) {
            let doomed: Vec<Value> = inner.objects[res]
                .iter()
                .filter(|((k_ns, _), _)| k_ns == ns)
                .map(|(_, v)| v.clone())
                .collect();
            for obj in doomed {
                self.commit(inner, res, EventKind::Deleted, obj, None);
            }
        }
    }

    /// POST pods/<name>/eviction: deletes the pod if no PodDisruptionBudget forbids it.
    pub fn evict(
        self: &Arc<Self>,
        ns: &str,
        name: &str,
        eviction: &Value,
        admit: &Admit,
    ) -> Result<Value, ApiError> {
        let pods_res = index_of("pods");
        let pods_def = &RESOURCES[pods_res];
        if let Some(body_name) = str_at(eviction, "/metadata/name")
            && body_name != name
        {
            return Err(ApiError::bad_request(format!(
                "name in URL does not match name in Eviction object: {body_name} vs {name}"
            )));
        }
        let mut inner = self.lock();
        let pod = inner.objects[pods_res]
            .get(&key(pods_def, Some(ns), name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(pods_def, name))?;
        admit(&AdmissionRequest {
            operation: Operation::Create,
            def: pods_def,
            subresource: "eviction",
            namespace: ns,
            old: Some(&pod),
            new: Some(eviction),
        })?;
        let pods: Vec<Value> = inner.objects[pods_res]
            .iter()
            .filter(|((k_ns, _), _)| k_ns == ns)
            .map(|(_, v)| v.clone())
            .collect();
        let pdb_res = index_of("poddisruptionbudgets");
        let pdbs: Vec<Value> = inner.objects[pdb_res]
            .iter()
            .filter(|((k_ns, _), _)| k_ns == ns)
            .map(|(_, v)| v.clone())
            .collect();
        let verdict = disruption::eviction_verdict(
            &pod,
            &pdbs.iter().collect::<Vec<_>>(),
            &pods.iter().collect::<Vec<_>>(),
        );
        let spent = match verdict {
            disruption::EvictionVerdict::Blocked {
                pdb,
                desired,
                current,
            } => {
                return Err(ApiError::disruption_budget(&pdb, desired, current));
            }
            disruption::EvictionVerdict::MultipleBudgets => {
                return Err(ApiError::internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                ));
            }
            disruption::EvictionVerdict::Allow(spent) => spent,
        };
        if let Some(pdb_name) = spent
            && let Some(pdb) = inner.objects[pdb_res]
                .get(&(ns.to_string(), pdb_name))
                .cloned()
        {
            let mut updated = pdb.clone();
            updated["status"]["disruptedPods"][name] = json!(now_rfc3339());
            let allowed = pdb
                .pointer("/status/disruptionsAllowed")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            updated["status"]["disruptionsAllowed"] = json!((allowed - 1).max(0));
            self.commit(&mut inner, pdb_res, EventKind::Modified, updated, Some(pdb));
        }
        let opts = DeleteOptions {
            grace_period_seconds: eviction
                .pointer("/deleteOptions/gracePeriodSeconds")
                .and_then(Value::as_i64),
            precondition_uid: str_at(eviction, "/deleteOptions/preconditions/uid")
                .map(String::from),
            precondition_rv: str_at(eviction, "/deleteOptions/preconditions/resourceVersion")
                .map(String::from),
        };
        let dry_run = eviction
            .pointer("/deleteOptions/dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| !d.is_empty());
        // The eviction deletes the pod itself: no second admission.
        let delete = Write {
            dry_run,
            ..Write::main()
        };
        self.delete_locked(&mut inner, pods_res, Some(ns), name, &opts, &delete)?;
        Ok(super::status::success(201))
    }
}
