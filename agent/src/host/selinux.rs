//! SELinux labels for the files the agent writes, from the loaded policy's `file_contexts`
//! (libselinux's `selabel_lookup`, through the `selinux` crate): each temp file gets the
//! context its final path has, set on the open file (`fsetxattr security.selinux`) before the
//! rename, as `restorecon` would set it (the file keeps its SELinux user: only role, type and
//! range come from the policy, so no exemption from the policy's identity constraint is
//! needed). A path file_contexts has no entry for keeps what it inherits. Used only on the
//! live host root with SELinux enabled; elsewhere [`for_root`] says why not, once.

use std::cell::RefCell;
use std::ffi::{CString, c_void};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use selinux::label::{Labeler, back_end};
use selinux::{FileAccessMode, KernelSupport, OpaqueSecurityContext, SecurityContext};

use crate::rootfs::{FileLabels, Root};

/// libselinux's `SELABEL_OPT_PATH` (selinux/label.h): the file_contexts file to use.
const SELABEL_OPT_PATH: i32 = 3;

/// The labels file_contexts gives (the loaded policy's, or a given file's).
#[derive(Debug, Default)]
pub struct SelinuxLabels {
    /// A file_contexts file instead of the loaded policy's (tests, checks of another policy).
    spec: Option<PathBuf>,
}

thread_local! {
    /// The open lookup handle of this thread and the spec it was opened for: opening one reads
    /// the whole file_contexts, so it is kept (a handle is not shared between threads).
    static HANDLE: RefCell<Option<(Option<PathBuf>, Labeler<back_end::File>)>> =
        const { RefCell::new(None) };
}

/// Labels for the files written under `root`: SELinux's when `root` is the live host root
/// and SELinux is enabled; `None` otherwise, with a log line saying why.
pub fn for_root(root: &Path, live: bool) -> Option<Arc<dyn FileLabels>> {
    if !live {
        tracing::info!(root = %root.display(), "not the host root: written files keep the SELinux labels they inherit");
        return None;
    }
    if selinux::kernel_support() == KernelSupport::Unsupported {
        tracing::info!("SELinux is disabled: written files are not labelled");
        return None;
    }
    Some(Arc::new(SelinuxLabels::default()))
}

/// `root` with SELinux labels for the files it writes, when [`for_root`] has them.
pub fn label_files(root: Root, live: bool) -> Root {
    match for_root(root.path(), live) {
        Some(labels) => root.with_labels(labels),
        None => root,
    }
}

impl SelinuxLabels {
    /// Labels from this file_contexts file instead of the loaded policy's.
    pub fn from_file_contexts(spec: &Path) -> Self {
        Self {
            spec: Some(spec.to_path_buf()),
        }
    }

    /// The context file_contexts gives `path` for a file of `mode`; `None` when it has none.
    pub fn lookup(&self, path: &Path, mode: u32) -> Result<Option<String>, String> {
        HANDLE.with(|cell| {
            let mut cached = cell.borrow_mut();
            if cached.as_ref().is_none_or(|(spec, _)| *spec != self.spec) {
                *cached = Some((self.spec.clone(), self.open()?));
            }
            let (_, labeler) = cached.as_ref().ok_or("no label handle")?;
            match labeler.look_up_by_path(path, FileAccessMode::new(mode)) {
                Ok(context) => Ok(Some(context_text(&context)?)),
                Err(selinux::errors::Error::IO { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    Ok(None)
                }
                Err(e) => Err(format!(
                    "looking up the SELinux label of {}: {}",
                    path.display(),
                    error_chain(&e)
                )),
            }
        })
    }

    fn open(&self) -> Result<Labeler<back_end::File>, String> {
        let spec = match &self.spec {
            Some(p) => Some(
                CString::new(p.as_os_str().as_encoded_bytes())
                    .map_err(|_| format!("file_contexts path {p:?} has a NUL byte"))?,
            ),
            None => None,
        };
        let options: Vec<(i32, *const c_void)> = spec
            .iter()
            .map(|s| (SELABEL_OPT_PATH, s.as_ptr().cast::<c_void>()))
            .collect();
        Labeler::new(&options, false)
            .map_err(|e| format!("opening the SELinux file contexts: {}", error_chain(&e)))
    }
}

/// `wanted` with the SELinux user of `current` (as restorecon without -F keeps it).
pub fn keep_user(wanted: &str, current: Option<&str>) -> Result<String, String> {
    let Some(current) = current else {
        return Ok(wanted.to_string());
    };
    let parse = |text: &str| {
        OpaqueSecurityContext::new(text)
            .map_err(|e| format!("SELinux context {text:?}: {}", error_chain(&e)))
    };
    let user = parse(current)?
        .user()
        .map_err(|e| format!("the user of {current:?}: {}", error_chain(&e)))?;
    let merged = parse(wanted)?;
    merged
        .set_user(&user)
        .map_err(|e| format!("setting the user of {wanted:?}: {}", error_chain(&e)))?;
    let text = merged
        .to_c_string()
        .map_err(|e| format!("SELinux context {wanted:?}: {}", error_chain(&e)))?;
    Ok(text.to_string_lossy().into_owned())
}

impl FileLabels for SelinuxLabels {
    fn label(&self, path: &Path, mode: u32, file: BorrowedFd<'_>) -> Result<(), String> {
        let Some(wanted) = self.lookup(path, mode)? else {
            return Ok(());
        };
        let current = SecurityContext::of_file(&file, false)
            .map_err(|e| {
                format!(
                    "reading the SELinux label of the new {}: {}",
                    path.display(),
                    error_chain(&e)
                )
            })?
            .map(|c| context_text(&c))
            .transpose()?;
        let wanted = keep_user(&wanted, current.as_deref())?;
        if current.as_deref() == Some(wanted.as_str()) {
            return Ok(());
        }
        let text = CString::new(wanted.clone())
            .map_err(|_| format!("SELinux context {wanted:?} has a NUL byte"))?;
        SecurityContext::from_c_str(&text, false)
            .set_for_file(&file)
            .map_err(|e| {
                format!(
                    "labelling the new {} {wanted}: {}",
                    path.display(),
                    error_chain(&e)
                )
            })
    }
}

fn context_text(context: &SecurityContext<'_>) -> Result<String, String> {
    match context.to_c_string() {
        Ok(Some(text)) => Ok(text.to_string_lossy().into_owned()),
        Ok(None) => Err("an empty SELinux context".into()),
        Err(e) => Err(error_chain(&e)),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests;
