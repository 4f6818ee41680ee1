//! The `opentelemetry` feature (`cargo test -p delayer --features
//! opentelemetry --test trace_otel`): a push inside a span carries that
//! span's context, and both Workers run the handler in a consumer span
//! whose parent is the producer's span, current while the handler runs.
//! The spans are recorded by a minimal tracer provider of the
//! `opentelemetry` API's traits, installed as the global one (no SDK crate).

#![cfg(feature = "opentelemetry")]

mod worker_kit;

use delayer::{Delayer, Job};
use opentelemetry::trace::{
    Span, SpanBuilder, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
    TracerProvider,
};
use opentelemetry::{global, Context, InstrumentationScope, KeyValue};
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};
use testkit::RedisServer;
use worker_kit::*;

/// A span as it ended.
#[derive(Debug, Clone)]
struct Ended {
    name: String,
    kind: Option<SpanKind>,
    parent: Option<SpanContext>,
    context: SpanContext,
    status: Status,
}

static ENDED: Mutex<Vec<Ended>> = Mutex::new(Vec::new());
static IDS: AtomicU64 = AtomicU64::new(1);

struct Recording(Ended, bool);

impl Span for Recording {
    fn add_event_with_timestamp<T: Into<Cow<'static, str>>>(&mut self, _: T, _: SystemTime, _: Vec<KeyValue>) {}
    fn span_context(&self) -> &SpanContext {
        &self.0.context
    }
    fn is_recording(&self) -> bool {
        !self.1
    }
    fn set_attribute(&mut self, _: KeyValue) {}
    fn set_status(&mut self, status: Status) {
        self.0.status = status;
    }
    fn update_name<T: Into<Cow<'static, str>>>(&mut self, name: T) {
        self.0.name = name.into().into_owned();
    }
    fn add_link(&mut self, _: SpanContext, _: Vec<KeyValue>) {}
    fn end_with_timestamp(&mut self, _: SystemTime) {
        if !std::mem::replace(&mut self.1, true) {
            ENDED.lock().expect("spans").push(self.0.clone());
        }
    }
}

struct RecordingTracer;

impl Tracer for RecordingTracer {
    type Span = Recording;
    fn build_with_context(&self, builder: SpanBuilder, parent_cx: &Context) -> Recording {
        let parent = parent_cx.has_active_span().then(|| parent_cx.span().span_context().clone());
        let trace = parent
            .as_ref()
            .map_or(TraceId::from(0xfeed_u128 << 64 | IDS.load(Ordering::Relaxed) as u128), |p| p.trace_id());
        let span = SpanId::from(IDS.fetch_add(1, Ordering::Relaxed));
        let context = SpanContext::new(trace, span, TraceFlags::SAMPLED, false, TraceState::default());
        let name = builder.name.into_owned();
        Recording(Ended { name, kind: builder.span_kind, parent, context, status: Status::Unset }, false)
    }
}

struct RecordingProvider;

impl TracerProvider for RecordingProvider {
    type Tracer = RecordingTracer;
    fn tracer_with_scope(&self, _: InstrumentationScope) -> RecordingTracer {
        RecordingTracer
    }
}

fn install() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| global::set_tracer_provider(RecordingProvider));
}

fn traceparent(sc: &SpanContext) -> String {
    format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8())
}

#[test]
fn the_consumer_span_is_a_child_of_the_producer_span_in_both_workers() {
    install();
    for kind in KINDS {
        let redis = RedisServer::start();
        let d = Delayer::open(&redis.url()).expect("client");
        let producer = global::tracer("test").start("checkout");
        let producer_sc = producer.span_context().clone();
        {
            let _current = Context::current_with_span(producer).attach();
            ready(&redis, &[Job::new("t", "o1", Duration::ZERO), Job::new("t", "o2", Duration::ZERO).traceparent("")]);
        }
        let pushed = field(&redis, "o1", "traceparent");
        assert_eq!(pushed, Some(traceparent(&producer_sc)), "a push inside a span carries its context");
        assert_eq!(field(&redis, "o2", "traceparent"), None, "\"\": none");
        assert_eq!(d.job("t", "o1").expect("lookup").traceparent, pushed);

        let current = Arc::new(Mutex::new(Vec::new()));
        let seen = current.clone();
        let plan = behaviour(move |job| {
            let cx = Context::current();
            seen.lock().expect("seen").push((job.id.clone(), cx.span().span_context().clone()));
            Plan { fail: (job.id == "o2").then(|| "no".to_string()), ..Plan::default() }
        });
        let w = start(kind, &redis.url(), Options { at_most_once: true, ..Options::default() }, plan);
        assert!(w.wait_for("succeeded", 1) && w.wait_for("failed", 1), "{kind:?}: {:?}", w.events());
        drop(w);

        let ended = ENDED.lock().expect("spans").clone();
        let consumer = |id: &str| {
            let (_, sc) = current.lock().expect("seen").iter().find(|(i, _)| i == id).cloned().expect("ran");
            ended.iter().find(|s| s.context == sc).cloned().unwrap_or_else(|| panic!("{kind:?}: {id}'s span ended"))
        };
        let o1 = consumer("o1");
        assert_eq!((o1.name.as_str(), o1.kind.clone()), ("t process", Some(SpanKind::Consumer)), "{kind:?}");
        let parent = o1.parent.expect("a parent");
        assert_eq!((parent.trace_id(), parent.span_id()), (producer_sc.trace_id(), producer_sc.span_id()), "{kind:?}");
        assert!(parent.is_remote(), "{kind:?}: the parent comes from Redis");
        assert_eq!(o1.status, Status::Unset);
        let o2 = consumer("o2");
        assert!(o2.parent.is_none(), "{kind:?}: no traceparent, a root span");
        assert_eq!(o2.status, Status::error("no"), "{kind:?}");
    }
}
