//! Percentiles of a sample, by sorting it (samples here are at most a few
//! hundred thousand values, so no histogram is needed).

/// p50, p99, max and count of a sample, in the sample's unit.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub count: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Summary {
    pub fn of(mut values: Vec<f64>) -> Summary {
        if values.is_empty() {
            return Summary::default();
        }
        values.sort_by(|a, b| a.total_cmp(b));
        Summary {
            count: values.len(),
            p50: rank(&values, 0.50),
            p99: rank(&values, 0.99),
            max: *values.last().expect("non-empty"),
        }
    }
}

/// Nearest-rank percentile of sorted values.
fn rank(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    let idx = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
    sorted[idx]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let s = Summary::of((1..=100).map(f64::from).collect());
        assert_eq!((s.count, s.p50, s.p99, s.max), (100, 50.0, 99.0, 100.0));
        let one = Summary::of(vec![7.0]);
        assert_eq!((one.p50, one.p99, one.max), (7.0, 7.0, 7.0));
    }
}
