//! Key names of the default prefix in either layout, written out as strings
//! (PROTOCOL.md's key tables), so that whole-system tests check the keys the
//! protocol promises rather than what the code under test computes.

/// The keys of one layout with the prefix `delayer:`.
#[derive(Debug, Clone, Copy)]
pub struct LayoutNames {
    /// The per-topic layout (`layout = topic`); else the classic one.
    pub per_topic: bool,
}

impl LayoutNames {
    /// From `CHAOS_LAYOUT`-style settings: "topic" is the per-topic layout.
    pub fn named(layout: &str) -> Self {
        LayoutNames { per_topic: layout == "topic" }
    }
    /// The `[delayer]` line that selects this layout ("" for the default).
    pub fn conf_line(&self) -> &'static str {
        if self.per_topic {
            "layout = topic"
        } else {
            ""
        }
    }
    fn of(&self, topic: &str, name: &str, classic: String) -> String {
        if self.per_topic {
            format!("delayer:{{{topic}}}:{name}")
        } else {
            classic
        }
    }
    pub fn pool(&self, topic: &str) -> String {
        self.of(topic, "pool", "delayer:job_pool".into())
    }
    pub fn ready(&self, topic: &str) -> String {
        self.of(topic, "ready", format!("delayer:ready_queue:{topic}"))
    }
    pub fn reserved(&self, topic: &str) -> String {
        self.of(topic, "reserved", "delayer:reserved".into())
    }
    pub fn dead(&self, topic: &str) -> String {
        self.of(topic, "dead", format!("delayer:dead:{topic}"))
    }
    pub fn malformed(&self, topic: &str) -> String {
        self.of(topic, "malformed", "delayer:malformed".into())
    }
    pub fn bucket(&self, topic: &str, id: &str) -> String {
        self.of(topic, &format!("job:{id}"), format!("delayer:job_bucket:{id}"))
    }
}
