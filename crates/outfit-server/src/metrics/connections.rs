//! The connection cap's figures, read when the metrics are rendered: open connections, idle ones
//! closed to make room, and new ones refused because every open one was busy.

use std::sync::{Arc, OnceLock};

use outfit_http::limit::ConnectionLimit;
use prometheus_client::{
    encoding::{EncodeMetric, MetricEncoder, NoLabelSet},
    metrics::{MetricType, TypedMetric},
};

/// The cap, once the server has one.
pub(super) type Cap = Arc<OnceLock<Arc<ConnectionLimit>>>;

/// Which figure.
#[derive(Debug, Clone, Copy)]
pub(super) enum Figure {
    Open,
    Evicted,
    Refused,
}

#[derive(Debug)]
pub(super) struct Connections(pub(super) Cap, pub(super) Figure);

impl TypedMetric for Connections {}

impl EncodeMetric for Connections {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let limit = self.0.get();
        match self.1 {
            Figure::Open => encoder.encode_gauge(&(limit.map_or(0, |l| l.open()) as i64)),
            Figure::Evicted => {
                encoder.encode_counter::<NoLabelSet, _, u64>(&limit.map_or(0, |l| l.evicted()), None)
            }
            Figure::Refused => {
                encoder.encode_counter::<NoLabelSet, _, u64>(&limit.map_or(0, |l| l.refused()), None)
            }
        }
    }

    fn metric_type(&self) -> MetricType {
        match self.1 {
            Figure::Open => MetricType::Gauge,
            Figure::Evicted | Figure::Refused => MetricType::Counter,
        }
    }
}
