//! Fault injection between client and server: the [`Faults`] configuration, the seeded
//! [`FaultPlan`] that decides per request which [`FaultKind`] (if any) to inject, and the
//! [`Counts`] of requests, response statuses and injected faults.
//!
//! A request is *eligible* when it passes every filter of the configuration (HTTP method or S3
//! operation name, a substring of the object key, conditional requests only). Each eligible
//! request draws one number from a deterministic generator seeded by `seed`; the four rates
//! split `[0, 1)` into error / drop / drop-after / slow / no fault, so they must sum to at most 1.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// What the fault layer does to a request. See the crate docs for the exact wire behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Answer 503 `SlowDown` or 500 `InternalError` with an S3 XML error body; the request is
    /// not executed.
    Error,
    /// Sleep [`Faults::slow_ms`], then execute the request normally.
    Slow,
    /// Read the request, then close the connection without executing it or answering.
    Drop,
    /// Execute the request, then close the connection instead of sending the response: the
    /// client cannot tell whether its write happened.
    DropAfter,
}

/// The fault configuration. `Default` injects nothing. Rates are fractions in `[0, 1]` of the
/// eligible requests and must sum to at most 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Faults {
    /// Seed of the generator that picks the faulted requests; the same seed and the same
    /// request order give the same faults.
    pub seed: u64,
    /// Fraction of eligible requests answered with an error status without being executed.
    pub error_rate: f64,
    /// The status of injected errors: 503 (`SlowDown`) or 500 (`InternalError`).
    pub error_status: u16,
    /// Fraction of eligible requests delayed by `slow_ms` before being executed.
    pub slow_rate: f64,
    /// Delay of a slow request, in milliseconds.
    pub slow_ms: u64,
    /// Fraction of eligible requests whose connection is closed before execution.
    pub drop_rate: f64,
    /// Fraction of eligible requests executed and then left unanswered (connection closed).
    pub drop_after_rate: f64,
    /// Only requests with one of these HTTP methods (`PUT`) or S3 operation names
    /// (`PutObject`, `CompleteMultipartUpload`, ...) are eligible; empty means all.
    pub methods: Vec<String>,
    /// Only requests whose object key contains this substring are eligible.
    pub key_contains: Option<String>,
    /// Only requests carrying `If-None-Match` or `If-Match` are eligible.
    pub conditional_only: bool,
    /// Inject at most this many faults (counted from the last [`Faults`] change), then none.
    pub limit: Option<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            seed: 0,
            error_rate: 0.0,
            error_status: 503,
            slow_rate: 0.0,
            slow_ms: 100,
            drop_rate: 0.0,
            drop_after_rate: 0.0,
            methods: Vec::new(),
            key_contains: None,
            conditional_only: false,
            limit: None,
        }
    }
}

/// A [`Faults`] configuration that cannot be used.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FaultsError {
    /// What is wrong, naming the field.
    pub detail: String,
}

impl fmt::Display for FaultsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid fault configuration: {}", self.detail)
    }
}

impl std::error::Error for FaultsError {}

impl Faults {
    /// Checks rates, their sum and the error status.
    ///
    /// # Errors
    /// [`FaultsError`] naming the first bad field.
    pub fn validate(&self) -> Result<(), FaultsError> {
        let rates = [
            ("error_rate", self.error_rate),
            ("slow_rate", self.slow_rate),
            ("drop_rate", self.drop_rate),
            ("drop_after_rate", self.drop_after_rate),
        ];
        for (name, rate) in rates {
            if !(0.0..=1.0).contains(&rate) {
                return Err(FaultsError { detail: format!("{name} = {rate} is not in [0, 1]") });
            }
        }
        let sum: f64 = rates.iter().map(|(_, r)| r).sum();
        if sum > 1.0 + 1e-9 {
            return Err(FaultsError { detail: format!("the rates sum to {sum}, more than 1") });
        }
        if self.error_status != 500 && self.error_status != 503 {
            return Err(FaultsError { detail: format!("error_status = {} (expected 500 or 503)", self.error_status) });
        }
        Ok(())
    }

    /// Whether a request with this method, operation, key and conditional flag may be faulted.
    pub(crate) fn eligible(&self, method: &str, operation: &str, key: &str, conditional: bool) -> bool {
        let method_ok = self.methods.is_empty()
            || self.methods.iter().any(|m| m.eq_ignore_ascii_case(method) || m.eq_ignore_ascii_case(operation));
        let key_ok = self.key_contains.as_deref().is_none_or(|s| key.contains(s));
        method_ok && key_ok && (conditional || !self.conditional_only)
    }
}

/// Decides which requests to fault: a [`Faults`] configuration plus the seeded generator and
/// the number of faults injected since the configuration was set.
#[derive(Debug)]
pub(crate) struct FaultPlan {
    faults: Faults,
    rng: SplitMix64,
    injected: u64,
}

impl FaultPlan {
    /// A plan for a (validated) configuration.
    pub(crate) fn new(faults: Faults) -> Self {
        let rng = SplitMix64(faults.seed);
        Self { faults, rng, injected: 0 }
    }

    pub(crate) fn faults(&self) -> &Faults {
        &self.faults
    }

    /// The fault for one request, drawing from the generator only for eligible requests.
    pub(crate) fn decide(&mut self, method: &str, operation: &str, key: &str, conditional: bool) -> Option<FaultKind> {
        let f = &self.faults;
        if !f.eligible(method, operation, key, conditional) || f.limit.is_some_and(|l| self.injected >= l) {
            return None;
        }
        let x = self.rng.next_unit();
        let mut edge = 0.0;
        let kinds = [
            (FaultKind::Error, f.error_rate),
            (FaultKind::Drop, f.drop_rate),
            (FaultKind::DropAfter, f.drop_after_rate),
            (FaultKind::Slow, f.slow_rate),
        ];
        for (kind, rate) in kinds {
            edge += rate;
            if x < edge {
                self.injected += 1;
                return Some(kind);
            }
        }
        None
    }
}

/// The SplitMix64 generator: tiny, deterministic and good enough to pick faulted requests.
#[derive(Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)` from the top 53 bits.
    fn next_unit(&mut self) -> f64 {
        #[allow(clippy::cast_precision_loss)] // 53 bits fit an f64 mantissa exactly
        let top = (self.next_u64() >> 11) as f64;
        top / (1u64 << 53) as f64
    }
}

/// Faults injected so far, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCounts {
    /// Requests answered with an injected error status.
    pub error: u64,
    /// Requests delayed.
    pub slow: u64,
    /// Connections closed before executing the request.
    pub drop: u64,
    /// Connections closed after executing the request.
    pub drop_after: u64,
}

impl FaultCounts {
    pub(crate) fn add(&mut self, kind: FaultKind) {
        let slot = match kind {
            FaultKind::Error => &mut self.error,
            FaultKind::Slow => &mut self.slow,
            FaultKind::Drop => &mut self.drop,
            FaultKind::DropAfter => &mut self.drop_after,
        };
        *slot = slot.saturating_add(1);
    }
}

/// What the server has seen since it started (or since the last reset). Control-endpoint
/// requests are not counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Requests by S3 operation name (`PutObject`, `GetObject`, `ListObjectsV2`, ...), faulted
    /// ones included.
    pub requests: BTreeMap<String, u64>,
    /// Responses sent, by HTTP status (injected errors included; dropped requests have none).
    pub statuses: BTreeMap<u16, u64>,
    /// Faults injected, by kind.
    pub faults: FaultCounts,
    /// The most requests being handled at one time (from arrival to answer).
    #[serde(default)]
    pub max_in_flight: u64,
}

impl Counts {
    /// Requests seen for one S3 operation name.
    pub fn requests_of(&self, operation: &str) -> u64 {
        self.requests.get(operation).copied().unwrap_or(0)
    }

    /// Responses sent with one HTTP status.
    pub fn status(&self, status: u16) -> u64 {
        self.statuses.get(&status).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_rejects_bad_rates_and_status() {
        assert!(Faults::default().validate().is_ok());
        let over = Faults { error_rate: 0.6, drop_rate: 0.5, ..Faults::default() };
        assert!(over.validate().unwrap_err().detail.contains("sum"));
        let neg = Faults { slow_rate: -0.1, ..Faults::default() };
        assert!(neg.validate().unwrap_err().detail.contains("slow_rate"));
        let status = Faults { error_status: 404, ..Faults::default() };
        assert!(status.validate().unwrap_err().detail.contains("error_status"));
    }

    #[test]
    fn rates_split_requests_deterministically() {
        let faults = Faults { seed: 7, error_rate: 0.25, drop_rate: 0.25, ..Faults::default() };
        let run = || {
            let mut plan = FaultPlan::new(faults.clone());
            (0..4000).map(|_| plan.decide("GET", "GetObject", "k", false)).collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run(), "same seed, same decisions");
        let errors = a.iter().filter(|k| **k == Some(FaultKind::Error)).count();
        let drops = a.iter().filter(|k| **k == Some(FaultKind::Drop)).count();
        let none = a.iter().filter(|k| k.is_none()).count();
        assert!((850..1150).contains(&errors), "errors {errors}");
        assert!((850..1150).contains(&drops), "drops {drops}");
        assert!((1850..2150).contains(&none), "none {none}");
    }

    #[test]
    fn filters_and_limit() {
        let faults = Faults {
            error_rate: 1.0,
            methods: vec!["put".into(), "GetObject".into()],
            key_contains: Some("commit".into()),
            limit: Some(2),
            ..Faults::default()
        };
        let mut plan = FaultPlan::new(faults);
        assert_eq!(plan.decide("HEAD", "HeadObject", "a/commit", false), None);
        assert_eq!(plan.decide("PUT", "PutObject", "a/data", false), None);
        assert_eq!(plan.decide("GET", "GetObject", "x/commit/1", false), Some(FaultKind::Error));
        assert_eq!(plan.decide("PUT", "PutObject", "commit", true), Some(FaultKind::Error));
        assert_eq!(plan.decide("PUT", "PutObject", "commit", true), None, "limit reached");

        let cond = Faults { drop_after_rate: 1.0, conditional_only: true, ..Faults::default() };
        let mut plan = FaultPlan::new(cond);
        assert_eq!(plan.decide("PUT", "PutObject", "k", false), None);
        assert_eq!(plan.decide("PUT", "PutObject", "k", true), Some(FaultKind::DropAfter));
    }

    #[test]
    fn faults_json_uses_defaults_for_missing_fields() {
        let f: Faults = serde_json::from_str(r#"{"error_rate": 0.5, "methods": ["PUT"]}"#).unwrap();
        assert_eq!(f.error_rate, 0.5);
        assert_eq!(f.error_status, 503);
        assert_eq!(f.methods, vec!["PUT".to_string()]);
        assert!(serde_json::from_str::<Faults>(r#"{"eror_rate": 0.5}"#).is_err());
    }
}
