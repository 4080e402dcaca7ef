//! The write paths of the store: seed, create (also by PUT where the type allows it), update,
//! patch; each validated by the type's strategy before it is committed.

use std::sync::Arc;

use serde_json::{Value, json};

use super::admission::{AdmissionRequest, Admit, Operation, admit_all};
use super::patch::{self, PatchType};
use super::registry::{RESOURCES, ResourceDef, index_of};
use super::status::ApiError;
use super::store::{EventKind, Inner, Store, key, obj_key};
use super::strategy::{self, Target, has_finalizers, metadata_mut, name_of, namespace_of, str_at};

/// How a write is made: which part of the object, for real or as a dry run, and the
/// admission check it must pass.
pub struct Write<'a> {
    pub target: Target,
    pub dry_run: bool,
    pub admit: &'a Admit<'a>,
}

impl Write<'static> {
    /// A write of the main resource that admission lets through (set-up, the library).
    pub fn main() -> Self {
        Self::to(Target::Main)
    }

    pub fn to(target: Target) -> Self {
        Self {
            target,
            dry_run: false,
            admit: &admit_all,
        }
    }
}

impl Write<'_> {
    fn subresource(&self) -> &'static str {
        match self.target {
            Target::Main => "",
            Target::Status => "status",
        }
    }

    pub(super) fn admit(&self, request: &AdmissionRequest) -> Result<(), ApiError> {
        (self.admit)(request)
    }

    fn admit_create(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        self.admit(&AdmissionRequest {
            operation: Operation::Create,
            def,
            subresource: "",
            namespace: namespace_of(obj),
            old: None,
            new: Some(obj),
        })
    }
}

impl Store {
    /// Inserts an object as given (status included), bypassing create rules: for seeding tests.
    pub fn seed(&self, mut obj: Value) -> Result<Value, ApiError> {
        let api_version = str_at(&obj, "/apiVersion").unwrap_or_default().to_string();
        let kind = str_at(&obj, "/kind").unwrap_or_default().to_string();
        let res = super::registry::find_kind(&api_version, &kind).ok_or_else(|| {
            ApiError::bad_request(format!(
                "no resource for apiVersion {api_version:?} kind {kind:?}"
            ))
        })?;
        let def = &RESOURCES[res];
        let ns = namespace_of(&obj).to_string();
        let status = obj.get("status").cloned();
        let ns_opt = def.namespaced.then_some(if ns.is_empty() {
            "default"
        } else {
            ns.as_str()
        });
        let mut prepared = strategy::prepare_create(def, ns_opt, obj.take())?;
        if let Some(status) = status {
            prepared["status"] = status;
        }
        let mut inner = self.lock();
        self.insert_new(&mut inner, res, prepared)
    }

    pub fn create(
        &self,
        res: usize,
        ns: Option<&str>,
        obj: Value,
        write: &Write,
    ) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        let prepared = strategy::prepare_create(def, ns, obj)?;
        let mut inner = self.lock();
        self.check_namespace(&inner, def, &prepared)?;
        write.admit_create(def, &prepared)?;
        if write.dry_run {
            if inner.objects[res].contains_key(&obj_key(&prepared)) {
                return Err(ApiError::already_exists(def, name_of(&prepared)));
            }
            return Ok(prepared);
        }
        self.insert_new(&mut inner, res, prepared)
    }

    /// A namespaced object's namespace must exist.
    fn check_namespace(
        &self,
        inner: &Inner,
        def: &ResourceDef,
        obj: &Value,
    ) -> Result<(), ApiError> {
        if def.namespaced {
            let ns = namespace_of(obj).to_string();
            if !inner.objects[index_of("namespaces")].contains_key(&(String::new(), ns.clone())) {
                return Err(ApiError::not_found(&RESOURCES[index_of("namespaces")], &ns));
            }
        }
        Ok(())
    }

    fn insert_new(&self, inner: &mut Inner, res: usize, obj: Value) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        if inner.objects[res].contains_key(&obj_key(&obj)) {
            return Err(ApiError::already_exists(def, name_of(&obj)));
        }
        let ns = namespace_of(&obj).to_string();
        let mut stored = self.commit(inner, res, EventKind::Added, obj, None);
        if matches!(def.plural, "pods" | "poddisruptionbudgets") {
            self.refresh_budgets(inner, &ns);
            stored = inner.objects[res]
                .get(&obj_key(&stored))
                .cloned()
                .unwrap_or(stored);
        }
        Ok(stored)
    }

    /// PUT: replaces the object (or its status) if `metadata.resourceVersion` is current or
    /// absent (absent is refused for custom resources).
    pub fn replace(
        self: &Arc<Self>,
        res: usize,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        write: &Write,
    ) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        let mut inner = self.lock();
        let Some(old) = inner.objects[res].get(&key(def, ns, name)).cloned() else {
            if !def.create_on_update || write.target != Target::Main {
                return Err(ApiError::not_found(def, name));
            }
            return self.create_on_update(&mut inner, res, ns, name, obj, write);
        };
        let requested_rv = str_at(&obj, "/metadata/resourceVersion")
            .unwrap_or_default()
            .to_string();
        if requested_rv.is_empty() && !def.unconditional_update {
            return Err(ApiError::invalid(
                def,
                name,
                "metadata.resourceVersion",
                "Invalid value: 0x0: must be specified for an update",
            ));
        }
        self.update_locked(&mut inner, res, old, obj, &requested_rv, write)
    }

    /// PUT of a missing object of a type that allows it: a create (a resourceVersion in the
    /// body fails as in etcd's create).
    fn create_on_update(
        &self,
        inner: &mut Inner,
        res: usize,
        ns: Option<&str>,
        name: &str,
        obj: Value,
        write: &Write,
    ) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        if name_of(&obj) != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                name_of(&obj)
            )));
        }
        if str_at(&obj, "/metadata/resourceVersion").is_some_and(|rv| !rv.is_empty()) {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let prepared = strategy::prepare_create(def, ns, obj)?;
        self.check_namespace(inner, def, &prepared)?;
        write.admit_create(def, &prepared)?;
        if write.dry_run {
            return Ok(prepared);
        }
        self.insert_new(inner, res, prepared)
    }

    /// PATCH: applies the patch to the current object, then updates (a resourceVersion the
    /// patch sets is a precondition).
    pub fn patch(
        self: &Arc<Self>,
        res: usize,
        ns: Option<&str>,
        name: &str,
        patch_type: PatchType,
        patch_body: &Value,
        write: &Write,
    ) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        if patch_type == PatchType::Strategic && def.custom {
            return Err(ApiError::unsupported_media_type(
                "application/strategic-merge-patch+json (not supported for custom resources)",
            ));
        }
        let mut inner = self.lock();
        let old = inner.objects[res]
            .get(&key(def, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(def, name))?;
        let mut patched = old.clone();
        patch::apply(patch_type, &mut patched, patch_body).map_err(|msg| {
            if patch_type == PatchType::Apply {
                ApiError::unsupported_media_type("application/apply-patch+yaml")
            } else {
                ApiError::new(422, "Invalid", msg)
            }
        })?;
        let requested_rv = str_at(&patched, "/metadata/resourceVersion")
            .unwrap_or_default()
            .to_string();
        self.update_locked(&mut inner, res, old, patched, &requested_rv, write)
    }

    fn update_locked(
        self: &Arc<Self>,
        inner: &mut Inner,
        res: usize,
        old: Value,
        new: Value,
        requested_rv: &str,
        write: &Write,
    ) -> Result<Value, ApiError> {
        let def = &RESOURCES[res];
        let name = name_of(&old).to_string();
        let current_rv = str_at(&old, "/metadata/resourceVersion").unwrap_or_default();
        if !requested_rv.is_empty() && requested_rv != current_rv {
            return Err(ApiError::conflict(def, &name));
        }
        let mut updated = strategy::prepare_update(def, &old, new, write.target)?;
        metadata_mut(&mut updated).insert("resourceVersion".into(), json!(current_rv));
        write.admit(&AdmissionRequest {
            operation: Operation::Update,
            def,
            subresource: write.subresource(),
            namespace: namespace_of(&old),
            old: Some(&old),
            new: Some(&updated),
        })?;
        if write.dry_run || updated == old {
            return Ok(updated);
        }
        let uid = str_at(&old, "/metadata/uid")
            .unwrap_or_default()
            .to_string();
        let finish_delete = updated.pointer("/metadata/deletionTimestamp").is_some()
            && !has_finalizers(&updated)
            && !inner.terminating.contains(&uid);
        let ns = namespace_of(&old).to_string();
        let stored = if finish_delete {
            self.commit(inner, res, EventKind::Deleted, updated, Some(old))
        } else {
            self.commit(inner, res, EventKind::Modified, updated, Some(old))
        };
        // The disruption controller recomputes a budget's status when its pods or its own
        // spec change.
        if matches!(def.plural, "pods" | "poddisruptionbudgets") {
            self.refresh_budgets(inner, &ns);
        }
        Ok(stored)
    }
}
