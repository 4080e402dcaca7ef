//! What the manager remembers between syncs (in memory, as the MCD does): images known pulled
//! and their layer sizes, and the sets whose current generation is complete. A sync that finds
//! an image gone from the runtime forgets everything, and the next one checks again.

use std::collections::HashMap;
use std::sync::Mutex;

/// At most this many images are remembered (the MCD's cache size); past it the images start
/// over (the runtime is asked again, which is cheap).
const MAX_IMAGES: usize = 1024;

/// An image: known pulled, and its layers (digest, size) once read.
type ImageEntry = (bool, Option<Vec<(String, i64)>>);

#[derive(Default)]
struct Inner {
    images: HashMap<String, ImageEntry>,
    /// Set UID -> the generation of it that is complete.
    sets: HashMap<String, i64>,
}

#[derive(Default)]
pub struct Cache {
    inner: Mutex<Inner>,
}

impl Cache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn entry(&self, image: &str, f: impl FnOnce(&mut ImageEntry)) {
        let mut inner = self.lock();
        if inner.images.len() >= MAX_IMAGES && !inner.images.contains_key(image) {
            inner.images.clear();
        }
        f(inner.images.entry(image.to_string()).or_default());
    }

    pub fn pulled(&self, image: &str) -> bool {
        self.lock().images.get(image).is_some_and(|e| e.0)
    }

    pub fn set_pulled(&self, image: &str) {
        self.entry(image, |e| e.0 = true);
    }

    pub fn layers(&self, image: &str) -> Option<Vec<(String, i64)>> {
        self.lock().images.get(image).and_then(|e| e.1.clone())
    }

    pub fn set_layers(&self, image: &str, layers: Vec<(String, i64)>) {
        self.entry(image, |e| e.1 = Some(layers));
    }

    /// Whether generation `generation` of the set with UID `uid` is complete.
    pub fn complete(&self, uid: &str, generation: i64) -> bool {
        self.lock().sets.get(uid) == Some(&generation)
    }

    pub fn set_complete(&self, uid: &str, generation: i64) {
        self.lock().sets.insert(uid.to_string(), generation);
    }

    /// Forgets everything.
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.images.clear();
        inner.sets.clear();
    }
}
