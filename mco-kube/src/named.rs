//! One cluster-scoped object followed by name (the ControllerConfig, FeatureGate/cluster,
//! ClusterVersion/version): a watch with a `metadata.name` field selector, so a node's RBAC
//! can name the one object it reads.

use std::fmt::Debug;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Resource;
use kube::api::Api;
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tracing::warn;

/// Where a followed object stands.
enum Seen {
    /// Nothing said yet.
    Nothing,
    Present,
    Absent,
}

/// `name` of kind `K` now and whenever it changes: `Some` with the object, `None` while it
/// does not exist. A type the API server does not serve (404: not an OpenShift cluster) or
/// may not show (403) also counts as absent, said once, while the watch keeps retrying with
/// `backoff`. Never ends.
pub(crate) fn watch_named<K>(
    api: Api<K>,
    name: &'static str,
    backoff: ResetTimerBackoff<watcher::ExponentialBackoff>,
) -> BoxStream<'static, Option<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let what = format!("{}/{name}", K::kind(&()));
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher(api, config)
        .backoff(backoff)
        .scan((Seen::Nothing, false), move |(seen, listed), event| {
            let out = match event {
                Ok(watcher::Event::Init) => {
                    *listed = false;
                    None
                }
                Ok(watcher::Event::InitApply(o) | watcher::Event::Apply(o)) => {
                    *listed = true;
                    *seen = Seen::Present;
                    Some(Some(o))
                }
                // A (re)list that does not find the object says it is gone.
                Ok(watcher::Event::InitDone) if !*listed => absent(seen),
                Ok(watcher::Event::InitDone) => None,
                Ok(watcher::Event::Delete(_)) => {
                    *seen = Seen::Absent;
                    Some(None)
                }
                Err(e) => match status_code(&e) {
                    Some(code @ (403 | 404)) => {
                        if !matches!(seen, Seen::Absent) {
                            warn!(error = %e, "{what} cannot be read (HTTP {code}): taken as absent; the watch retries");
                        }
                        absent(seen)
                    }
                    _ => {
                        warn!(error = %e, "watching {what} failed; the watch restarts");
                        None
                    }
                },
            };
            futures::future::ready(Some(out))
        })
        .filter_map(futures::future::ready)
        .boxed()
}

/// `Some(None)` unless absence was already said.
fn absent<K>(seen: &mut Seen) -> Option<Option<K>> {
    let said = matches!(seen, Seen::Absent);
    *seen = Seen::Absent;
    (!said).then_some(None)
}

/// The HTTP status of an API error behind a watcher error.
fn status_code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}
