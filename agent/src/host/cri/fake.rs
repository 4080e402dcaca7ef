//! [`FakeImageService`]: an in-memory [`ImageService`] for tests of callers. It has the images
//! it is given, pulls any other image unless told to fail it (a queue of failures per image,
//! each used once), and records every call.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use machine_config::pull_auth::Credentials;

use super::{CriError, ImageService};

/// One call the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageCall {
    Status(String),
    /// The image and the user name it was pulled with.
    Pull(String, Option<String>),
}

#[derive(Default)]
struct Inner {
    present: BTreeSet<String>,
    failures: BTreeMap<String, VecDeque<CriError>>,
    calls: Vec<ImageCall>,
}

#[derive(Default)]
pub struct FakeImageService {
    inner: Mutex<Inner>,
}

impl FakeImageService {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The runtime has `image`.
    pub fn add(&self, image: &str) {
        self.lock().present.insert(image.to_string());
    }

    /// The runtime lost `image` (the kubelet's garbage collection, an admin's `crictl rmi`).
    pub fn remove(&self, image: &str) {
        self.lock().present.remove(image);
    }

    /// The next pull of `image` fails with `message` (a runtime's error), once.
    pub fn fail_pull(&self, image: &str, message: &str) {
        self.lock()
            .failures
            .entry(image.to_string())
            .or_default()
            .push_back(CriError::Status(message.to_string()));
    }

    pub fn has(&self, image: &str) -> bool {
        self.lock().present.contains(image)
    }

    pub fn calls(&self) -> Vec<ImageCall> {
        self.lock().calls.clone()
    }

    /// How many pulls of `image` were tried.
    pub fn pulls_of(&self, image: &str) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| matches!(c, ImageCall::Pull(i, _) if i == image))
            .count()
    }
}

#[async_trait]
impl ImageService for FakeImageService {
    async fn image_present(&self, image: &str) -> Result<bool, CriError> {
        let mut inner = self.lock();
        inner.calls.push(ImageCall::Status(image.to_string()));
        Ok(inner.present.contains(image))
    }

    async fn pull(&self, image: &str, auth: Option<&Credentials>) -> Result<String, CriError> {
        let mut inner = self.lock();
        inner.calls.push(ImageCall::Pull(
            image.to_string(),
            auth.map(|a| a.username.clone()),
        ));
        if let Some(e) = inner.failures.get_mut(image).and_then(VecDeque::pop_front) {
            return Err(e);
        }
        inner.present.insert(image.to_string());
        Ok(format!("sha256:{}", image.len()))
    }
}
