//! Image pulls through the runtime, as the MCD's prefetch workers make them: at most `workers`
//! at once, each image checked with `ImageStatus` first and pulled with retries, a pause after
//! each image, and once the disk is full ("no space left on device") the images still queued
//! for that sync are left (the MCD's drain).
//!
//! A pull is a task of its own, owned by the [`Puller`], not by the sync that asked for it: a
//! sync cancelled (a set changed) or timed out leaves its pulls running, and the next sync that
//! asks for the same image waits for the pull in flight instead of starting another.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use machine_config::mco::pinned_images::{PULL_ATTEMPTS, is_no_space};
use machine_config::pull_auth::Credentials;
use tokio::sync::Semaphore;

use crate::host::cri::ImageService;

/// The outcome of one image's pull, shared by every sync waiting for it.
pub type PullResult = Result<(), PullError>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullError {
    /// The pull failed with this message (the MCD's words).
    #[error("{0}")]
    Failed(String),
    /// Left unpulled: the disk filled up during the sync that queued it.
    #[error("image {0:?} was not pulled: the disk is full")]
    Drained(String),
}

/// The timings of the pulls (the MCD's by default; tests shorten them).
#[derive(Debug, Clone)]
pub struct PullTimings {
    pub workers: usize,
    /// The waits between attempts ([`PULL_ATTEMPTS`] attempts, so one fewer wait).
    pub waits: Vec<Duration>,
    /// A worker's pause after each image.
    pub pause: Duration,
}

/// Runs and deduplicates pulls.
pub struct Puller {
    cri: Arc<dyn ImageService>,
    workers: Arc<Semaphore>,
    timings: PullTimings,
    in_flight: Arc<Mutex<HashMap<String, Shared<BoxFuture<'static, PullResult>>>>>,
}

impl Puller {
    pub fn new(cri: Arc<dyn ImageService>, timings: PullTimings) -> Self {
        Puller {
            cri,
            workers: Arc::new(Semaphore::new(timings.workers.max(1))),
            timings,
            in_flight: Arc::default(),
        }
    }

    /// The pull of `image` with `auth`, started unless one is in flight. `drain` is the
    /// asking sync's: set when a pull of it hits a full disk, it leaves the rest queued.
    pub fn pull(
        &self,
        image: &str,
        auth: Option<Credentials>,
        drain: Arc<AtomicBool>,
    ) -> Shared<BoxFuture<'static, PullResult>> {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(running) = in_flight.get(image) {
            return running.clone();
        }
        let (cri, workers, timings) =
            (self.cri.clone(), self.workers.clone(), self.timings.clone());
        let registry = self.in_flight.clone();
        let name = image.to_string();
        let task = tokio::spawn(async move {
            let result = match workers.acquire_owned().await {
                Ok(_permit) if drain.load(Ordering::SeqCst) => {
                    Err(PullError::Drained(name.clone()))
                }
                Ok(_permit) => {
                    let result =
                        ensure_pulled(cri.as_ref(), &name, auth.as_ref(), &timings.waits).await;
                    if let Err(PullError::Failed(e)) = &result
                        && is_no_space(e)
                    {
                        drain.store(true, Ordering::SeqCst);
                    }
                    // the worker rests before its next image (the permit is still held)
                    tokio::time::sleep(timings.pause).await;
                    result
                }
                Err(_) => Err(PullError::Failed(format!(
                    "pulling {name:?}: the workers are gone"
                ))),
            };
            registry
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&name);
            result
        });
        let shared = task
            .map(|joined| {
                joined.unwrap_or_else(|e| {
                    Err(PullError::Failed(format!("the pull task failed: {e}")))
                })
            })
            .boxed()
            .shared();
        in_flight.insert(image.to_string(), shared.clone());
        shared
    }
}

/// The MCD's `ensurePullImage`: nothing to do when the runtime has the image, else up to
/// [`PULL_ATTEMPTS`] pulls with `waits` between them; a full disk fails at once.
pub async fn ensure_pulled(
    cri: &dyn ImageService,
    image: &str,
    auth: Option<&Credentials>,
    waits: &[Duration],
) -> PullResult {
    let failed = |tries: u32, e: &str| {
        PullError::Failed(format!(
            "failed to pull image {image:?} ({tries} tries): {e}"
        ))
    };
    match cri.image_present(image).await {
        Ok(true) => return Ok(()),
        Ok(false) => {}
        Err(e) => return Err(PullError::Failed(e.to_string())),
    }
    let mut tries = 0;
    loop {
        tries += 1;
        match cri.pull(image, auth).await {
            Ok(reference) => {
                tracing::info!(image, reference, "image pulled");
                return Ok(());
            }
            Err(e) => {
                let message = e.to_string();
                tracing::warn!(image, tries, error = %message, "pulling an image failed");
                if is_no_space(&message) || tries >= PULL_ATTEMPTS {
                    return Err(failed(tries, &message));
                }
                let wait = waits
                    .get(tries as usize - 1)
                    .or(waits.last())
                    .copied()
                    .unwrap_or_default();
                tokio::time::sleep(wait).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::cri::{FakeImageService, ImageCall};

    const NO_SPACE: &str = "failed to copy: write /var/lib/containers/x: no space left on device";

    fn timings() -> PullTimings {
        PullTimings {
            workers: 2,
            waits: vec![Duration::from_millis(1); 3],
            pause: Duration::ZERO,
        }
    }

    #[tokio::test]
    async fn present_images_are_not_pulled_and_failures_are_retried() {
        let cri = FakeImageService::new();
        cri.add("a");
        ensure_pulled(&cri, "a", None, &timings().waits)
            .await
            .unwrap();
        assert_eq!(cri.calls(), [ImageCall::Status("a".into())]);
        cri.fail_pull("b", "unauthorized");
        cri.fail_pull("b", "timeout");
        ensure_pulled(&cri, "b", None, &timings().waits)
            .await
            .unwrap();
        assert_eq!(cri.pulls_of("b"), 3);
        for _ in 0..4 {
            cri.fail_pull("c", "manifest unknown");
        }
        let e = ensure_pulled(&cri, "c", None, &timings().waits)
            .await
            .unwrap_err();
        assert_eq!(
            e,
            PullError::Failed("failed to pull image \"c\" (4 tries): manifest unknown".into())
        );
        cri.fail_pull("d", NO_SPACE);
        let e = ensure_pulled(&cri, "d", None, &timings().waits)
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("failed to pull image \"d\" (1 tries): {NO_SPACE}"),
            "a full disk is not retried"
        );
    }

    #[tokio::test]
    async fn a_full_disk_leaves_the_rest_of_the_sync_and_pulls_are_shared() {
        let cri = Arc::new(FakeImageService::new());
        let one_worker = PullTimings {
            workers: 1,
            ..timings()
        };
        let puller = Puller::new(cri.clone(), one_worker);
        cri.fail_pull("full", NO_SPACE);
        let drain = Arc::new(AtomicBool::new(false));
        let first = puller.pull("full", None, drain.clone());
        let second = puller.pull("next", None, drain.clone());
        let again = puller.pull("next", None, drain.clone());
        assert!(first.await.is_err());
        assert_eq!(second.await, Err(PullError::Drained("next".into())));
        assert_eq!(again.await, Err(PullError::Drained("next".into())));
        assert_eq!(cri.pulls_of("next"), 0, "left unpulled");
        // A new sync (its own drain) pulls it.
        let fresh = puller.pull("next", None, Arc::new(AtomicBool::new(false)));
        assert_eq!(fresh.await, Ok(()));
        assert!(cri.has("next"));
    }

    #[tokio::test]
    async fn credentials_reach_the_runtime() {
        let cri = FakeImageService::new();
        let auth = Credentials {
            username: "u".into(),
            password: "p".into(),
        };
        ensure_pulled(&cri, "img", Some(&auth), &[]).await.unwrap();
        assert_eq!(
            cri.calls()[1],
            ImageCall::Pull("img".into(), Some("u".into()))
        );
    }
}
