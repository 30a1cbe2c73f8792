//! Why an invocation, an event or a sweep stopped short of reconciling everything, as types: the
//! records and the status report carry their text (the [`std::fmt::Display`] forms below, stable:
//! tests and the CLI read them).

use std::fmt;

/// Work handed back because the invocation's deadline came first: retryable, and retried (the
/// event redelivered, the next sweep, the next shard).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deferred {
    /// An event's write: the event is handed back.
    EventHandedBack,
    /// A sweep's write: the next sweep writes it.
    NextSweep,
    /// A policy change for a cluster swept less than a window ago: the notification is handed back.
    SweepWindow,
    /// The organization hub's shard, before these clusters' session was started.
    BeforeClusters(Vec<String>),
}

impl fmt::Display for Deferred {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self {
            Deferred::EventHandedBack => "the invocation's deadline was near; the event is handed back".to_string(),
            Deferred::NextSweep => "the invocation's deadline was near; the next sweep writes it".to_string(),
            Deferred::SweepWindow => "this cluster was swept less than a window ago and the invocation's deadline \
                                      comes first; the notification is handed back"
                .to_string(),
            Deferred::BeforeClusters(clusters) => {
                format!("the invocation's deadline was near before {}", clusters.join(", "))
            }
        };
        write!(f, "deferred: {why}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts the records and status reports have always carried.
    #[test]
    fn the_renderings_are_stable() {
        let cases = [
            (Deferred::EventHandedBack, "deferred: the invocation's deadline was near; the event is handed back"),
            (Deferred::NextSweep, "deferred: the invocation's deadline was near; the next sweep writes it"),
            (
                Deferred::SweepWindow,
                "deferred: this cluster was swept less than a window ago and the invocation's deadline comes first; \
                 the notification is handed back",
            ),
            (
                Deferred::BeforeClusters(vec!["a-1".into(), "b-2".into()]),
                "deferred: the invocation's deadline was near before a-1, b-2",
            ),
        ];
        for (d, text) in cases {
            assert_eq!(d.to_string(), text);
        }
    }
}
