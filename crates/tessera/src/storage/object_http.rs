//! The HTTP client under the object-store backend: `object_store`'s own reqwest client, wrapped so
//! that every attempt it sends (retries included) is counted by kind, timed, and checked for a
//! retryable failure. Counts go to the process-wide statistics (`vfs_object_*`) and to the
//! backend's own [`RequestCounts`], which tests read to assert how many requests an operation
//! cost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use object_store::client::{
    ClientOptions, HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};

use crate::stats::{self, Counter, Timer};

/// What an HTTP request to an S3-compatible store does, from its method and query string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// GET of an object or a byte range of one.
    Get,
    /// HEAD of an object.
    Head,
    /// PUT of a whole object or of one part of a multipart upload.
    Put,
    /// GET of a listing page (`list-type=2`).
    List,
    /// DELETE of one object or POST `?delete` of many.
    Delete,
    /// POST `?uploads` (start), POST `?uploadId=` (complete) or DELETE `?uploadId=` (abort).
    Multipart,
}

impl RequestKind {
    fn of(method: &http::Method, query: &str) -> Self {
        let has = |key: &str| query.split('&').any(|p| p == key || p.starts_with(&format!("{key}=")));
        match *method {
            http::Method::HEAD => Self::Head,
            http::Method::GET if has("list-type") => Self::List,
            http::Method::PUT => Self::Put,
            http::Method::POST if has("delete") => Self::Delete,
            http::Method::POST => Self::Multipart,
            http::Method::DELETE if has("uploadId") => Self::Multipart,
            http::Method::DELETE => Self::Delete,
            _ => Self::Get,
        }
    }

    fn counter(self) -> Counter {
        match self {
            Self::Get => Counter::VfsObjectGetRequests,
            Self::Head => Counter::VfsObjectHeadRequests,
            Self::Put => Counter::VfsObjectPutRequests,
            Self::List => Counter::VfsObjectListRequests,
            Self::Delete => Counter::VfsObjectDeleteRequests,
            Self::Multipart => Counter::VfsObjectMultipartRequests,
        }
    }

    fn timer(self) -> Timer {
        match self {
            Self::Get => Timer::VfsObjectGet,
            Self::Head => Timer::VfsObjectHead,
            Self::Put => Timer::VfsObjectPut,
            Self::List => Timer::VfsObjectList,
            Self::Delete => Timer::VfsObjectDelete,
            Self::Multipart => Timer::VfsObjectMultipart,
        }
    }
}

/// Requests one object-store backend has sent, by kind, and the attempts that failed with a
/// retryable answer. Every attempt counts, so a request retried twice counts three times.
#[derive(Debug, Default)]
pub(crate) struct RequestCounts {
    by_kind: [AtomicU64; 6],
    failed: AtomicU64,
}

/// A copy of `RequestCounts` at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestTally {
    /// GETs of objects or byte ranges.
    pub get: u64,
    /// HEADs.
    pub head: u64,
    /// PUTs (objects and parts).
    pub put: u64,
    /// Listing pages.
    pub list: u64,
    /// Deletes (single or bulk).
    pub delete: u64,
    /// Multipart start/complete/abort.
    pub multipart: u64,
    /// Attempts answered with 5xx or 429, or lost to a transport error.
    pub failed: u64,
}

impl RequestTally {
    /// Every request sent.
    pub fn total(&self) -> u64 {
        self.get + self.head + self.put + self.list + self.delete + self.multipart
    }

    /// The requests sent between `earlier` and `self`.
    pub fn since(&self, earlier: &RequestTally) -> RequestTally {
        RequestTally {
            get: self.get - earlier.get,
            head: self.head - earlier.head,
            put: self.put - earlier.put,
            list: self.list - earlier.list,
            delete: self.delete - earlier.delete,
            multipart: self.multipart - earlier.multipart,
            failed: self.failed - earlier.failed,
        }
    }
}

impl RequestCounts {
    fn record(&self, kind: RequestKind, failed: bool) {
        self.by_kind[kind as usize].fetch_add(1, Ordering::Relaxed);
        stats::add(kind.counter(), 1);
        if failed {
            self.failed.fetch_add(1, Ordering::Relaxed);
            stats::add(Counter::VfsObjectFailedAttempts, 1);
        }
    }

    /// The counts now.
    pub(crate) fn snapshot(&self) -> RequestTally {
        let k = |kind: RequestKind| self.by_kind[kind as usize].load(Ordering::Relaxed);
        RequestTally {
            get: k(RequestKind::Get),
            head: k(RequestKind::Head),
            put: k(RequestKind::Put),
            list: k(RequestKind::List),
            delete: k(RequestKind::Delete),
            multipart: k(RequestKind::Multipart),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}

/// Makes `object_store`'s reqwest client and wraps it in a [`CountingService`].
#[derive(Debug)]
pub(crate) struct CountingConnector {
    pub(crate) counts: Arc<RequestCounts>,
}

impl HttpConnector for CountingConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(CountingService { inner, counts: Arc::clone(&self.counts) }))
    }
}

/// Counts and times every request before passing it on.
#[derive(Debug)]
struct CountingService {
    inner: HttpClient,
    counts: Arc<RequestCounts>,
}

#[async_trait]
impl HttpService for CountingService {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let kind = RequestKind::of(req.method(), req.uri().query().unwrap_or(""));
        let _t = stats::timer(kind.timer());
        let result = self.inner.execute(req).await;
        let failed = match &result {
            Ok(r) => r.status().is_server_error() || r.status() == http::StatusCode::TOO_MANY_REQUESTS,
            Err(_) => true,
        };
        self.counts.record(kind, failed);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_method_and_query() {
        use http::Method;
        assert_eq!(RequestKind::of(&Method::GET, ""), RequestKind::Get);
        assert_eq!(RequestKind::of(&Method::GET, "list-type=2&prefix=a%2F"), RequestKind::List);
        assert_eq!(RequestKind::of(&Method::HEAD, ""), RequestKind::Head);
        assert_eq!(RequestKind::of(&Method::PUT, "partNumber=1&uploadId=x"), RequestKind::Put);
        assert_eq!(RequestKind::of(&Method::POST, "delete"), RequestKind::Delete);
        assert_eq!(RequestKind::of(&Method::POST, "uploads"), RequestKind::Multipart);
        assert_eq!(RequestKind::of(&Method::DELETE, "uploadId=x"), RequestKind::Multipart);
        assert_eq!(RequestKind::of(&Method::DELETE, ""), RequestKind::Delete);
        // A key named like a query word is not a query word.
        assert_eq!(RequestKind::of(&Method::GET, "x-id=GetObject"), RequestKind::Get);
    }
}
