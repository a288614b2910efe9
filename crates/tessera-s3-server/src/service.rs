//! The HTTP layer in front of s3s: the control endpoint (`/__tessera/...`), request counting and
//! fault injection. Every request passes through [`Handler::handle`]; only requests that are
//! neither control requests nor faulted away reach the s3s service.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use s3s::Body;
use s3s::service::S3Service;
use tokio::sync::Notify;

use crate::classify::classify;
use crate::faults::{Counts, FaultKind, FaultPlan, Faults, FaultsError};

/// Path prefix of the control endpoint. `__tessera` is not a valid bucket name, so no S3
/// request can collide with it.
pub(crate) const CONTROL_PREFIX: &str = "/__tessera/";

/// State shared by the server's connections and its owner: fault plan and counts.
#[derive(Debug)]
pub(crate) struct Shared {
    plan: Mutex<FaultPlan>,
    counts: Mutex<Counts>,
    request_ids: AtomicU64,
    /// Requests between arrival and answer now.
    in_flight: AtomicU64,
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it (counts and the plan
/// stay usable; a panic elsewhere is reported by its own thread).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new(faults: Faults) -> Self {
        Self {
            plan: Mutex::new(FaultPlan::new(faults)),
            counts: Mutex::new(Counts::default()),
            request_ids: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
        }
    }

    /// Replaces the fault configuration, restarting its generator and limit.
    pub(crate) fn set_faults(&self, faults: Faults) -> Result<(), FaultsError> {
        faults.validate()?;
        *lock(&self.plan) = FaultPlan::new(faults);
        Ok(())
    }

    pub(crate) fn faults(&self) -> Faults {
        lock(&self.plan).faults().clone()
    }

    pub(crate) fn counts(&self) -> Counts {
        lock(&self.counts).clone()
    }

    pub(crate) fn reset_counts(&self) {
        *lock(&self.counts) = Counts::default();
    }

    fn count_status(&self, status: StatusCode) {
        let mut c = lock(&self.counts);
        let n = c.statuses.entry(status.as_u16()).or_insert(0);
        *n = n.saturating_add(1);
    }
}

/// One request being handled: counted in [`Shared::in_flight`] until dropped.
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn start(shared: &'a Shared) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        let mut counts = lock(&shared.counts);
        counts.max_in_flight = counts.max_in_flight.max(now);
        Self(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Handles the requests of one server: control endpoint, counts, faults, then s3s.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) s3: S3Service,
    pub(crate) shared: Arc<Shared>,
}

impl Handler {
    /// Answers one request. For `drop` and `drop_after` faults it signals `kill` (the
    /// connection task then closes the socket) and never returns.
    pub(crate) async fn handle(self, req: Request<Incoming>, kill: Arc<Notify>) -> Result<Response<Body>, Infallible> {
        if req.uri().path().starts_with(CONTROL_PREFIX) {
            return Ok(self.control(req).await);
        }
        let shared = Arc::clone(&self.shared);
        let _in_flight = InFlight::start(&shared);
        let c = classify(req.method(), req.uri().path(), req.uri().query(), req.headers());
        let fault = {
            let mut counts = lock(&self.shared.counts);
            let n = counts.requests.entry(c.operation.to_string()).or_insert(0);
            *n = n.saturating_add(1);
            drop(counts);
            lock(&self.shared.plan).decide(req.method().as_str(), c.operation, &c.key, c.conditional)
        };
        if let Some(kind) = fault {
            lock(&self.shared.counts).faults.add(kind);
        }
        match fault {
            Some(FaultKind::Error) => {
                let status = lock(&self.shared.plan).faults().error_status;
                let resp = self.injected_error(req, status).await;
                self.shared.count_status(resp.status());
                Ok(resp)
            }
            Some(FaultKind::Drop) => {
                // Read the whole request first so the close is a clean FIN after a complete
                // request, not a reset that depends on what was still in flight.
                let _ = req.into_body().collect().await;
                kill.notify_one();
                std::future::pending().await
            }
            Some(FaultKind::DropAfter) => {
                let _ = self.execute(req).await;
                kill.notify_one();
                std::future::pending().await
            }
            Some(FaultKind::Slow) => {
                let ms = lock(&self.shared.plan).faults().slow_ms;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(self.execute_counted(req).await)
            }
            None => Ok(self.execute_counted(req).await),
        }
    }

    async fn execute_counted(&self, req: Request<Incoming>) -> Response<Body> {
        let resp = self.execute(req).await;
        self.shared.count_status(resp.status());
        resp
    }

    /// Runs the request through s3s (authentication, routing, the store).
    ///
    /// The body is read completely first. s3s-fs answers some failures (a conditional PUT's
    /// 412, for one) before reading the body; hyper then closes the connection while the client
    /// is still sending, and the client sees a broken connection instead of the answer. S3
    /// itself reads the request before a client sees the error, and so does this server.
    async fn execute(&self, req: Request<Incoming>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                let id = self.shared.request_ids.fetch_add(1, Ordering::Relaxed);
                let msg = format!("reading the request body failed: {e}");
                return xml_error(StatusCode::BAD_REQUEST, "IncompleteBody", &msg, parts.uri.path(), id, true);
            }
        };
        match self.s3.call(Request::from_parts(parts, Body::from(body))).await {
            Ok(resp) => resp,
            Err(err) => {
                let id = self.shared.request_ids.fetch_add(1, Ordering::Relaxed);
                let msg = format!("s3s failed to process the request: {err:?}");
                xml_error(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", &msg, "", id, true)
            }
        }
    }

    /// The injected error response; the request body is read and discarded so the connection
    /// stays usable, and the request is not executed.
    async fn injected_error(&self, req: Request<Incoming>, status: u16) -> Response<Body> {
        let with_body = req.method() != Method::HEAD;
        let resource = req.uri().path().to_string();
        let _ = req.into_body().collect().await;
        let id = self.shared.request_ids.fetch_add(1, Ordering::Relaxed);
        if status == 500 {
            let msg = "We encountered an internal error. Please try again. (injected fault)";
            xml_error(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", msg, &resource, id, with_body)
        } else {
            let msg = "Please reduce your request rate. (injected fault)";
            xml_error(StatusCode::SERVICE_UNAVAILABLE, "SlowDown", msg, &resource, id, with_body)
        }
    }

    /// `GET|PUT /__tessera/faults`, `GET|DELETE /__tessera/counts`.
    async fn control(&self, req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path().trim_start_matches(CONTROL_PREFIX).to_string();
        match (req.method().clone(), path.as_str()) {
            (Method::GET, "faults") => json_response(StatusCode::OK, &self.shared.faults()),
            (Method::PUT, "faults") => {
                let body = match req.into_body().collect().await {
                    Ok(b) => b.to_bytes(),
                    Err(e) => return json_error(StatusCode::BAD_REQUEST, &format!("reading the body: {e}")),
                };
                let faults: Faults = match serde_json::from_slice(&body) {
                    Ok(f) => f,
                    Err(e) => return json_error(StatusCode::BAD_REQUEST, &format!("fault JSON: {e}")),
                };
                match self.shared.set_faults(faults) {
                    Ok(()) => json_response(StatusCode::OK, &self.shared.faults()),
                    Err(e) => json_error(StatusCode::BAD_REQUEST, &e.to_string()),
                }
            }
            (Method::GET, "counts") => json_response(StatusCode::OK, &self.shared.counts()),
            (Method::DELETE, "counts") => {
                self.shared.reset_counts();
                json_response(StatusCode::OK, &self.shared.counts())
            }
            (method, _) => json_error(
                StatusCode::NOT_FOUND,
                &format!("no control endpoint {method} {CONTROL_PREFIX}{path} (faults: GET/PUT, counts: GET/DELETE)"),
            ),
        }
    }
}

fn json_response<T: serde::Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(bytes) => response(status, "application/json", Body::from(Bytes::from(bytes))),
        Err(e) => response(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", Body::from(e.to_string())),
    }
}

fn json_error(status: StatusCode, message: &str) -> Response<Body> {
    json_response(status, &serde_json::json!({ "error": message }))
}

fn response(status: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    resp
}

/// An S3 XML error response (`<Error><Code>..`), as S3 sends for 4xx/5xx.
fn xml_error(
    status: StatusCode,
    code: &str,
    message: &str,
    resource: &str,
    id: u64,
    with_body: bool,
) -> Response<Body> {
    let body = if with_body {
        Body::from(format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{}</Message>\
             <Resource>{}</Resource><RequestId>tessera-{id}</RequestId></Error>",
            xml_escape(message),
            xml_escape(resource)
        ))
    } else {
        Body::empty()
    };
    let mut resp = response(status, "application/xml", body);
    if let Ok(v) = header::HeaderValue::from_str(&format!("tessera-{id}")) {
        resp.headers_mut().insert("x-amz-request-id", v);
    }
    resp
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_errors_escape_and_carry_code() {
        let resp = xml_error(StatusCode::SERVICE_UNAVAILABLE, "SlowDown", "a<b", "/b/k&1", 3, true);
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = resp.into_body().bytes().unwrap();
        let text = std::str::from_utf8(&body).unwrap();
        assert!(text.contains("<Code>SlowDown</Code>"), "{text}");
        assert!(text.contains("a&lt;b") && text.contains("/b/k&amp;1"), "{text}");
    }
}
