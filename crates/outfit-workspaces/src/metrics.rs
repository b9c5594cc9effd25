//! Prometheus metrics of the backend, served on the admin port: requests by endpoint and status
//! with their latency, and creates accepted. The workspace API is not a hot path (a few requests
//! a second), so prometheus-client's own metric types are used as they are.

use std::time::Duration;

use hyper::StatusCode;
use prometheus_client::{
    encoding::{EncodeLabelSet, text::encode},
    metrics::{
        counter::Counter,
        family::Family,
        histogram::{Histogram, exponential_buckets},
    },
    registry::Registry,
};

use crate::api::Route;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    code: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: &'static str,
}

/// The backend's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<EndpointLabels, Histogram>,
    creates: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("outfit_workspaces");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "API requests by endpoint and HTTP status",
            requests.clone(),
        );
        let latency = Family::<EndpointLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 4.0, 10))
        });
        registry.register(
            "request_duration_seconds",
            "Time to answer an API request (long polls included)",
            latency.clone(),
        );
        let creates = Counter::default();
        registry.register("creates", "Pods created through create_pod", creates.clone());
        Self {
            registry,
            requests,
            latency,
            creates,
        }
    }
}

impl Metrics {
    /// Counts a request.
    pub fn request(&self, route: Option<Route>, status: StatusCode, took: Duration) {
        let endpoint = route.map_or("other", Route::name);
        self.requests
            .get_or_create(&RequestLabels {
                endpoint,
                code: status.as_u16(),
            })
            .inc();
        self.latency
            .get_or_create(&EndpointLabels { endpoint })
            .observe(took.as_secs_f64());
    }

    /// Counts a pod created.
    pub fn created(&self) {
        self.creates.inc();
    }

    /// The metrics in the OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut text = String::new();
        encode(&mut text, &self.registry).expect("writing to a String never fails");
        text
    }
}
