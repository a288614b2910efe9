//! Names the S3 operation of a path-style HTTP request (`PUT /bucket/key` is `PutObject`) from
//! its method, path, query and headers, without parsing the body. The fault layer uses the name
//! for counts and fault filters; s3s does its own routing independently.

use http::{HeaderMap, Method};

/// The S3 operation, bucket and key of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Classified {
    pub(crate) operation: &'static str,
    /// The percent-decoded object key (empty for bucket and service requests).
    pub(crate) key: String,
    /// Whether the request carries `If-None-Match` or `If-Match`.
    pub(crate) conditional: bool,
}

/// Classifies a path-style request. Unknown shapes are named `Other`.
pub(crate) fn classify(method: &Method, path: &str, query: Option<&str>, headers: &HeaderMap) -> Classified {
    let has = |name: &str| query.is_some_and(|q| q.split('&').any(|kv| kv.split('=').next() == Some(name)));
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let (bucket, key) = trimmed.split_once('/').unwrap_or((trimmed, ""));
    let key = percent_decode(key);
    let copy = headers.contains_key("x-amz-copy-source");
    let conditional = headers.contains_key(http::header::IF_NONE_MATCH) || headers.contains_key(http::header::IF_MATCH);
    let operation = if bucket.is_empty() {
        match *method {
            Method::GET => "ListBuckets",
            _ => "Other",
        }
    } else if key.is_empty() {
        match *method {
            Method::PUT => "CreateBucket",
            Method::DELETE => "DeleteBucket",
            Method::HEAD => "HeadBucket",
            Method::POST if has("delete") => "DeleteObjects",
            Method::GET if has("location") => "GetBucketLocation",
            Method::GET if has("uploads") => "ListMultipartUploads",
            Method::GET if has("list-type") => "ListObjectsV2",
            Method::GET => "ListObjects",
            _ => "Other",
        }
    } else {
        match *method {
            Method::PUT if has("uploadId") && copy => "UploadPartCopy",
            Method::PUT if has("uploadId") => "UploadPart",
            Method::PUT if copy => "CopyObject",
            Method::PUT => "PutObject",
            Method::GET if has("uploadId") => "ListParts",
            Method::GET => "GetObject",
            Method::HEAD => "HeadObject",
            Method::DELETE if has("uploadId") => "AbortMultipartUpload",
            Method::DELETE => "DeleteObject",
            Method::POST if has("uploads") => "CreateMultipartUpload",
            Method::POST if has("uploadId") => "CompleteMultipartUpload",
            _ => "Other",
        }
    };
    Classified { operation, key, conditional }
}

/// Decodes `%XX` escapes; malformed escapes are kept as they are (the key is only matched
/// against a substring filter).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            // h and l are < 16, so the byte fits.
            out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(method: Method, path: &str, query: Option<&str>, copy: bool) -> &'static str {
        let mut headers = HeaderMap::new();
        if copy {
            headers.insert("x-amz-copy-source", "b/src".parse().unwrap());
        }
        classify(&method, path, query, &headers).operation
    }

    #[test]
    fn names_the_operations_object_store_uses() {
        assert_eq!(op(Method::PUT, "/b/k/x", None, false), "PutObject");
        assert_eq!(op(Method::PUT, "/b/k", None, true), "CopyObject");
        assert_eq!(op(Method::GET, "/b/k", None, false), "GetObject");
        assert_eq!(op(Method::HEAD, "/b/k", None, false), "HeadObject");
        assert_eq!(op(Method::DELETE, "/b/k", None, false), "DeleteObject");
        assert_eq!(op(Method::POST, "/b", Some("delete"), false), "DeleteObjects");
        assert_eq!(op(Method::GET, "/b", Some("list-type=2&prefix=a"), false), "ListObjectsV2");
        assert_eq!(op(Method::POST, "/b/k", Some("uploads"), false), "CreateMultipartUpload");
        assert_eq!(op(Method::PUT, "/b/k", Some("partNumber=1&uploadId=u"), false), "UploadPart");
        assert_eq!(op(Method::POST, "/b/k", Some("uploadId=u"), false), "CompleteMultipartUpload");
        assert_eq!(op(Method::DELETE, "/b/k", Some("uploadId=u"), false), "AbortMultipartUpload");
        assert_eq!(op(Method::PUT, "/b", None, false), "CreateBucket");
        assert_eq!(op(Method::GET, "/", None, false), "ListBuckets");
    }

    #[test]
    fn key_is_decoded_and_conditional_detected() {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::IF_NONE_MATCH, "*".parse().unwrap());
        let c = classify(&Method::PUT, "/b/a%20b/c%2", None, &headers);
        assert_eq!(c.key, "a b/c%2");
        assert!(c.conditional);
        assert_eq!(percent_decode("%zz%41"), "%zzA");
    }
}
