//! Fault injection: error answers, added latency or no answer at all for requests matching a
//! method and a path pattern, and dropping every open watch.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

/// What happens to a matching request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultAction {
    /// Answer with this status code and a matching `Status` body.
    Fail(u16),
    /// Wait this long, then serve the request normally.
    Delay(Duration),
    /// Never answer (the client's timeout decides).
    Hang,
}

#[derive(Debug, Clone)]
struct Rule {
    method: Option<String>,
    pattern: String,
    action: FaultAction,
    remaining: Option<usize>,
}

/// The fault injector of one server. Patterns are matched against the request path, or against
/// `path?query` when the pattern contains `?`; `*` matches any run of characters.
pub struct Faults {
    rules: Mutex<Vec<Rule>>,
    watch_generation: watch::Sender<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            rules: Mutex::new(Vec::new()),
            watch_generation: watch::channel(0).0,
        }
    }
}

impl Faults {
    fn add(&self, method: &str, pattern: &str, action: FaultAction, remaining: Option<usize>) {
        let method = (method != "*").then(|| method.to_ascii_uppercase());
        self.rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Rule {
                method,
                pattern: pattern.to_string(),
                action,
                remaining,
            });
    }

    /// The next `count` requests matching `method` (`"*"` for any) and `pattern` get `status`.
    pub fn fail_next(&self, method: &str, pattern: &str, count: usize, status: u16) {
        self.add(method, pattern, FaultAction::Fail(status), Some(count));
    }

    /// Matching requests (the next `count`, or all while the rule stands) are delayed.
    pub fn delay(&self, method: &str, pattern: &str, delay: Duration, count: Option<usize>) {
        self.add(method, pattern, FaultAction::Delay(delay), count);
    }

    /// The next `count` matching requests are never answered.
    pub fn hang_next(&self, method: &str, pattern: &str, count: usize) {
        self.add(method, pattern, FaultAction::Hang, Some(count));
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Ends every open watch (clients see the stream close and must re-watch).
    pub fn drop_watches(&self) {
        self.watch_generation.send_modify(|g| *g += 1);
    }

    pub(crate) fn watch_generation(&self) -> watch::Receiver<u64> {
        self.watch_generation.subscribe()
    }

    /// The actions for a request, consuming counted rules: delays in order, then at most one
    /// failure or hang.
    pub(crate) fn check(&self, method: &str, path: &str, query: &str) -> Vec<FaultAction> {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        let mut actions = Vec::new();
        for rule in rules.iter_mut() {
            if rule.remaining == Some(0) || rule.method.as_deref().is_some_and(|m| m != method) {
                continue;
            }
            let subject = if rule.pattern.contains('?') {
                format!("{path}?{query}")
            } else {
                path.to_string()
            };
            if !glob(&rule.pattern, &subject) {
                continue;
            }
            let terminal = !matches!(rule.action, FaultAction::Delay(_));
            if terminal && actions.iter().any(|a| !matches!(a, FaultAction::Delay(_))) {
                continue;
            }
            if let Some(n) = &mut rule.remaining {
                *n -= 1;
            }
            actions.push(rule.action);
        }
        rules.retain(|r| r.remaining != Some(0));
        actions
    }
}

/// `*` matches any run of characters; everything else is literal.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("/api/v1/nodes/*", "/api/v1/nodes/n1"));
        assert!(glob("*", "/anything"));
        assert!(glob("/api/*/nodes", "/api/v1/nodes"));
        assert!(!glob("/api/v1/nodes/*", "/api/v1/nodes"));
        assert!(glob("/api/v1/nodes", "/api/v1/nodes"));
        assert!(glob("*eviction", "/api/v1/namespaces/a/pods/b/eviction"));
        assert!(glob("/a*b*c", "/axxbyyc"));
        assert!(!glob("/a*b*c", "/axxcyyb"));
    }

    #[test]
    fn counted_rules_run_out() {
        let faults = Faults::default();
        faults.fail_next("PATCH", "/api/v1/nodes/*", 2, 500);
        faults.delay("*", "*", Duration::from_millis(5), Some(1));
        assert_eq!(
            faults.check("GET", "/api/v1/nodes/n1", ""),
            vec![FaultAction::Delay(Duration::from_millis(5))]
        );
        assert_eq!(
            faults.check("PATCH", "/api/v1/nodes/n1", ""),
            vec![FaultAction::Fail(500)]
        );
        assert_eq!(
            faults.check("PATCH", "/api/v1/nodes/n1", ""),
            vec![FaultAction::Fail(500)]
        );
        assert!(faults.check("PATCH", "/api/v1/nodes/n1", "").is_empty());
        faults.hang_next("GET", "/api/v1/nodes?*watch=true*", 1);
        assert!(
            faults
                .check("GET", "/api/v1/nodes", "fieldSelector=x")
                .is_empty()
        );
        assert_eq!(
            faults.check("GET", "/api/v1/nodes", "watch=true&x=1"),
            vec![FaultAction::Hang]
        );
    }
}
