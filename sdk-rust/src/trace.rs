//! Trace context across the delay: a job pushed with a W3C `traceparent`
//! ([`crate::Job::traceparent`]) keeps it in its hash (the `traceparent`
//! field push.lua writes), and every consumer gets it back
//! ([`crate::Message::traceparent`], [`crate::Reserved::traceparent`],
//! [`crate::worker::Delivery::traceparent`]), so the consumer's span can be
//! a child of the producer's however long the job waited.
//!
//! The field is read as untrusted input: anyone with Redis access may have
//! written it. A value that is not a traceparent by
//! [`crate::validate::traceparent`]'s rule is treated as absent, never an
//! error (the job is still handed out), and said once per process on stderr
//! (`delayer_protocol::replies::traceparent` reads it).
//! With the `opentelemetry` feature, `delayer::trace::otel` makes the producer's span the
//! parent of the consumer's.
//!
//! ```no_run
//! use delayer::{Delayer, Job};
//! use std::time::Duration;
//!
//! # fn main() -> delayer::Result<()> {
//! let delayer = Delayer::open("redis://127.0.0.1:6379/0")?;
//! let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
//! delayer.push_job(&Job::new("email", "order:42", Duration::from_secs(30)).traceparent(tp))?;
//! if let Some(job) = delayer.bpop("email", Duration::from_secs(60))? {
//!     assert_eq!(job.traceparent.as_deref(), Some(tp));
//! }
//! # Ok(())
//! # }
//! ```

use crate::worker::Delivery;

#[cfg(feature = "opentelemetry")]
pub mod otel;

/// push.lua's traceparent argument for a job: the one given (checked; ""
/// is none), else with the `opentelemetry` feature the current span's, else "".
pub(crate) fn outgoing(given: Option<&str>) -> crate::Result<String> {
    match given {
        Some("") => Ok(String::new()),
        Some(t) => Ok(crate::validate::traceparent(t).map(|()| t.to_string())?),
        #[cfg(feature = "opentelemetry")]
        None => Ok(otel::current().unwrap_or_default()),
        #[cfg(not(feature = "opentelemetry"))]
        None => Ok(String::new()),
    }
}

/// Runs a blocking handler for `delivery`: in its consumer span with the
/// `opentelemetry` feature (`otel`), else as it is.
pub(crate) fn run_in_span(delivery: &Delivery, run: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    #[cfg(feature = "opentelemetry")]
    {
        let cx = otel::consumer(delivery);
        let outcome = {
            let _current = cx.clone().attach();
            run()
        };
        otel::finish(&cx, &outcome);
        outcome
    }
    #[cfg(not(feature = "opentelemetry"))]
    {
        let _ = delivery;
        run()
    }
}

/// An async handler's run for `delivery`, as [`run_in_span`]: `start`
/// makes the handler's future (within the span too, for the work a handler
/// does before its first await).
#[cfg(feature = "aio")]
pub(crate) fn future_in_span<F>(
    delivery: &Delivery,
    start: impl FnOnce() -> F,
) -> impl std::future::Future<Output = Result<(), String>> + Send + 'static
where
    F: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    #[cfg(feature = "opentelemetry")]
    {
        use opentelemetry::context::FutureExt;
        let cx = otel::consumer(delivery);
        let run = {
            let _current = cx.clone().attach();
            start()
        };
        async move {
            let outcome = run.with_context(cx.clone()).await;
            otel::finish(&cx, &outcome);
            outcome
        }
    }
    #[cfg(not(feature = "opentelemetry"))]
    {
        let _ = delivery;
        start()
    }
}
