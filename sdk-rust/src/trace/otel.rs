//! The `opentelemetry` feature: the job's traceparent linked to the
//! `opentelemetry` crate's context, so a trace runs from the producer's span
//! across the delay into the consumer's.
//!
//! A push without [`crate::Job::traceparent`] takes the current span's
//! context ([`current`]); `.traceparent("")` pushes none. Both Workers run
//! each handler in a consumer span (`"<topic> process"`, kind `Consumer`,
//! from the global tracer provider's tracer `"delayer"`) whose parent is the
//! producer's context ([`parent`]), made current while the handler runs, so
//! spans the handler starts are its children; a handler's `Err` sets the
//! span's status to error. With no tracer provider installed, the API's
//! no-op tracer costs next to nothing.

use crate::worker::Delivery;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
};
use opentelemetry::{global, Context, KeyValue};

/// The current span's context as a traceparent, if there is a valid one.
pub fn current() -> Option<String> {
    let cx = Context::current();
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid().then(|| format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()))
}

/// A context whose (remote) span is the one `traceparent` names: the parent
/// of a consumer's span. The empty context when it is not a traceparent.
pub fn parent(traceparent: &str) -> Context {
    if !crate::validate::is_traceparent(traceparent.as_bytes()) {
        return Context::new();
    }
    let (trace, span, flags) = (&traceparent[3..35], &traceparent[36..52], &traceparent[53..]);
    let parsed = (TraceId::from_hex(trace), SpanId::from_hex(span), u8::from_str_radix(flags, 16));
    let (Ok(trace), Ok(span), Ok(flags)) = parsed else { return Context::new() };
    let sc = SpanContext::new(trace, span, TraceFlags::new(flags), true, TraceState::default());
    Context::new().with_remote_span_context(sc)
}

/// A context holding a new consumer span for `delivery`, child of its
/// producer's context (a root span when the job carries none).
pub(crate) fn consumer(delivery: &Delivery) -> Context {
    let parent = delivery.traceparent.as_deref().map(parent).unwrap_or_default();
    let tracer = global::tracer("delayer");
    let span = tracer
        .span_builder(format!("{} process", delivery.topic))
        .with_kind(SpanKind::Consumer)
        .with_attributes([
            KeyValue::new("messaging.system", "delayer"),
            KeyValue::new("messaging.destination.name", delivery.topic.clone()),
            KeyValue::new("messaging.message.id", delivery.id.clone()),
        ])
        .start_with_context(&tracer, &parent);
    parent.with_span(span)
}

/// Ends the span of [`consumer`], with the handler's outcome.
pub(crate) fn finish(cx: &Context, outcome: &Result<(), String>) {
    let span = cx.span();
    if let Err(e) = outcome {
        span.set_status(Status::error(e.clone()));
    }
    span.end();
}
