//! The agent's API requests as the API test server logged them, counted by kind, watches
//! apart (a test holds them to a budget, the rebootless benchmark prints them).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mco_test_support::apiserver::RequestRecord;

use super::{NODE, Node, secs};

/// A request as counted: `VERB resource[/subresource]`, a watch or a watch's list apart.
pub fn kind(r: &RequestRecord) -> Option<String> {
    let watch = r
        .query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    if watch {
        return None;
    }
    // /api/v1/nodes/NAME, /apis/GROUP/VERSION/RESOURCE[/NAME[/SUB]], namespaced forms too
    let parts: Vec<&str> = r.path.trim_matches('/').split('/').collect();
    let rest = match parts.first() {
        Some(&"api") => &parts[2..],
        _ => &parts[3.min(parts.len())..],
    };
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let resource = match rest {
        [resource] | [resource, _] => resource.to_string(),
        [resource, _, sub, ..] => format!("{resource}/{sub}"),
        [] => r.path.clone(),
    };
    Some(format!("{} {resource}", r.method))
}

/// The agent's requests (not watches) in `requests`, counted by kind.
pub fn tally(requests: &[RequestRecord]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in requests
        .iter()
        .filter(|r| r.user == format!("system:node:{NODE}"))
    {
        if let Some(k) = kind(r) {
            *out.entry(k).or_insert(0) += 1;
        }
    }
    out
}

/// Waits until the agent's request log stops growing (its best-effort writes landed): nothing
/// new for `quiet`.
pub async fn settled(node: &Node, quiet: Duration) -> usize {
    let deadline = Instant::now() + secs(30);
    let mut last = (node.api().requests().len(), Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = node.api().requests().len();
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() >= quiet {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "the agent's requests never settled"
        );
    }
}
