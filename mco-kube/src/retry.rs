//! The retry loop every API call goes through: transient failures (conflicts, throttling, 5xx, transport errors, requests that hang) are retried with
//! exponential backoff until the call lands or the caller drops the future; anything else is
//! returned at once.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use tracing::warn;

use super::error::ClusterError;

/// Whether a failed call may succeed if repeated.
pub fn transient(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => {
            (status.code == 409 && status.reason != "AlreadyExists")
                || status.code == 429
                || status.code >= 500
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// Backoff and per-attempt timeout of API calls.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    pub initial_delay: Duration,
    pub max_delay: Duration,
    /// A call with no answer after this long is abandoned and retried.
    pub attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            initial_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(10),
            attempt_timeout: Duration::from_secs(30),
        }
    }
}

/// One attempt's failure: the client's error, or no answer in time.
enum Failure {
    Kube(kube::Error),
    Timeout,
}

/// Runs `op` until it succeeds or fails with a non-transient error. Never gives up on
/// transient errors: bound it with a timeout or by dropping the future (or use
/// [`with_retry_until`], whose error then says what the last attempt met).
pub async fn with_retry<T, F, Fut>(
    policy: &RetryPolicy,
    action: &str,
    op: F,
) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    retry(policy, action, op, &Mutex::new(None)).await
}

/// [`with_retry`] until `deadline`; past it, the error is `ACTION: timed out; last error:
/// CAUSE`, the cause of the last failed attempt (`connection refused`), not only that time ran
/// out.
pub async fn with_retry_until<T, F, Fut>(
    policy: &RetryPolicy,
    action: &str,
    deadline: tokio::time::Instant,
    op: F,
) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let last = Mutex::new(None);
    match tokio::time::timeout_at(deadline, retry(policy, action, op, &last)).await {
        Ok(result) => result,
        Err(_) => {
            let last = last.lock().unwrap_or_else(|p| p.into_inner()).take();
            Err(ClusterError::Client {
                action: action.to_string(),
                message: match last {
                    Some(cause) => format!("timed out; last error: {cause}"),
                    None => "timed out".to_string(),
                },
            })
        }
    }
}

/// What a transport error comes down to: its innermost cause, without the OS error number
/// (`connection refused`), else the client's message.
pub fn cause(err: &kube::Error) -> String {
    let mut innermost: &dyn std::error::Error = err;
    while let Some(source) = innermost.source() {
        innermost = source;
    }
    let text = innermost.to_string();
    let text = match text.find(" (os error") {
        Some(at) => &text[..at],
        None => &text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => err.to_string(),
    }
}

async fn retry<T, F, Fut>(
    policy: &RetryPolicy,
    action: &str,
    mut op: F,
    last: &Mutex<Option<String>>,
) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut delay = policy.initial_delay;
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let failure = match tokio::time::timeout(policy.attempt_timeout, op()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(err)) => Failure::Kube(err),
            Err(_) => Failure::Timeout,
        };
        let detail = match failure {
            Failure::Kube(err) if !transient(&err) => {
                return Err(ClusterError::from_kube(action, err));
            }
            Failure::Kube(err) => {
                *last.lock().unwrap_or_else(|p| p.into_inner()) = Some(cause(&err));
                err.to_string()
            }
            Failure::Timeout => {
                let detail = format!("no answer within {:?}", policy.attempt_timeout);
                *last.lock().unwrap_or_else(|p| p.into_inner()) = Some(detail.clone());
                detail
            }
        };
        warn!(action, attempt, error = %detail, retry_in = ?delay, "transient API failure, retrying");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(policy.max_delay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status::failure("m", reason).with_code(code)))
    }

    #[test]
    fn classification() {
        for (code, reason, want) in [
            (409, "Conflict", true),
            (409, "AlreadyExists", false),
            (429, "TooManyRequests", true),
            (500, "InternalError", true),
            (503, "ServiceUnavailable", true),
            (404, "NotFound", false),
            (422, "Invalid", false),
            (403, "Forbidden", false),
        ] {
            assert_eq!(transient(&api(code, reason)), want, "{code} {reason}");
        }
    }

    fn quick() -> RetryPolicy {
        RetryPolicy {
            initial_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(4),
            attempt_timeout: Duration::from_millis(100),
        }
    }

    #[tokio::test]
    async fn retries_transient_then_returns_permanent() {
        let policy = quick();
        let mut calls = 0;
        let result = with_retry(&policy, "patch", || {
            calls += 1;
            let n = calls;
            async move {
                match n {
                    1 => Err(api(503, "ServiceUnavailable")),
                    2 => Err(api(409, "Conflict")),
                    _ => Ok(n),
                }
            }
        })
        .await;
        assert_eq!(result.unwrap(), 3);
        let err = with_retry(&policy, "get node n1", || async {
            Err::<(), _>(api(404, "NotFound"))
        })
        .await
        .unwrap_err();
        assert_eq!(err.code(), Some(404));
        assert_eq!(err.to_string(), "get node n1: m (HTTP 404 NotFound)");
    }

    #[tokio::test]
    async fn hanging_attempts_are_abandoned() {
        let policy = quick();
        let mut calls = 0;
        let result = with_retry(&policy, "patch", || {
            calls += 1;
            let n = calls;
            async move {
                if n == 1 {
                    std::future::pending::<()>().await;
                }
                Ok::<_, kube::Error>(n)
            }
        })
        .await;
        assert_eq!(result.unwrap(), 2);
    }
}
