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

/// Why an invocation, an event or a sweep reconciled nothing, or stopped short ([`StopKind`]), with
/// its text: what the status report, the logs and the invocation's answer have always carried (its
/// `Display`, its serialized form, and `&str` through `Deref` for readers that match on words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    kind: StopKind,
    text: String,
}

/// The reasons an outcome carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopKind {
    /// No valid policy anywhere: nothing is written (fail closed); why.
    NoPolicy(String),
    /// Handed back before the invocation's deadline.
    Deferred(Deferred),
    /// The sweep has nowhere to list, or a part of it is refused; why.
    CannotSweep(String),
    /// A member account could not be had (not listed, its area unreadable, its role refused); why.
    Member(String),
    /// Not a payload, an event or a delivery tagwarden reads; why.
    Unreadable(String),
    /// Several, in the order they came.
    Several(Vec<StopKind>),
}

impl StopKind {
    /// Whether the same work again can succeed: only work handed back before a deadline is; of
    /// several, when any is. The Lambda's `errorType` and a queue's redelivery read this.
    pub fn is_retryable(&self) -> bool {
        match self {
            StopKind::Deferred(_) => true,
            StopKind::NoPolicy(_) | StopKind::CannotSweep(_) | StopKind::Member(_) | StopKind::Unreadable(_) => false,
            StopKind::Several(all) => all.iter().any(StopKind::is_retryable),
        }
    }

    /// Each single reason, in the order they came (a `Several` unfolded).
    pub fn each(&self) -> Vec<&StopKind> {
        match self {
            StopKind::Several(all) => all.iter().flat_map(StopKind::each).collect(),
            one => vec![one],
        }
    }
}

impl fmt::Display for StopKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopKind::NoPolicy(why)
            | StopKind::CannotSweep(why)
            | StopKind::Member(why)
            | StopKind::Unreadable(why) => f.write_str(why),
            StopKind::Deferred(d) => d.fmt(f),
            StopKind::Several(all) => {
                for (i, k) in all.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    k.fmt(f)?;
                }
                Ok(())
            }
        }
    }
}

impl Stop {
    pub fn new(kind: StopKind) -> Self {
        let text = kind.to_string();
        Stop { kind, text }
    }

    pub fn kind(&self) -> &StopKind {
        &self.kind
    }

    /// This reason and then `other`, each once (the same reason twice is one).
    pub fn and(self, other: Stop) -> Stop {
        if self == other {
            return self;
        }
        let mut all = match self.kind {
            StopKind::Several(all) => all,
            one => vec![one],
        };
        match other.kind {
            StopKind::Several(more) => all.extend(more),
            one => all.push(one),
        }
        Stop::new(StopKind::Several(all))
    }
}

impl From<StopKind> for Stop {
    fn from(kind: StopKind) -> Self {
        Stop::new(kind)
    }
}

impl From<Deferred> for Stop {
    fn from(d: Deferred) -> Self {
        Stop::new(StopKind::Deferred(d))
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::ops::Deref for Stop {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl serde::Serialize for Stop {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
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

    /// Only work handed back before a deadline is retryable; several are when any is.
    #[test]
    fn only_deferred_work_is_retryable() {
        let member = StopKind::Member("m".into());
        assert!(StopKind::Deferred(Deferred::NextSweep).is_retryable());
        for permanent in [
            StopKind::NoPolicy("p".into()),
            StopKind::CannotSweep("c".into()),
            member.clone(),
            StopKind::Unreadable("u".into()),
        ] {
            assert!(!permanent.is_retryable(), "{permanent:?}");
        }
        let nested =
            StopKind::Several(vec![member.clone(), StopKind::Several(vec![StopKind::Deferred(Deferred::SweepWindow)])]);
        assert!(nested.is_retryable());
        assert!(!StopKind::Several(vec![member.clone(), StopKind::NoPolicy("p".into())]).is_retryable());
        assert_eq!(nested.each(), vec![&member, &StopKind::Deferred(Deferred::SweepWindow)]);
    }

    /// Two reasons joined as outcomes always were: `"<a>; <b>"`, the same one once.
    #[test]
    fn reasons_join_as_before() {
        let a = Stop::new(StopKind::Member("account 1: refused".into()));
        let b = Stop::from(Deferred::NextSweep);
        assert_eq!(a.clone().and(a.clone()).to_string(), "account 1: refused");
        let both = a.and(b);
        assert_eq!(
            both.to_string(),
            "account 1: refused; deferred: the invocation's deadline was near; the next sweep writes it"
        );
        assert_eq!(serde_json::to_value(&both).expect("json"), serde_json::Value::String(both.to_string()));
        assert!(both.contains("refused"));
    }
}
