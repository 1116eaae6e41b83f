//! `podhost get events`: [NAMESPACE] LAST SEEN TYPE REASON OBJECT MESSAGE, as kubectl.

use chrono::{DateTime, Utc};

use super::age::human_duration;
use super::table::{KUBECTL_MIN_WIDTH, align_min};
use crate::status::Event;

/// The table; `namespace_column` (`-A`) adds NAMESPACE first.
pub fn render_events(events: &[Event], namespace_column: bool, now: DateTime<Utc>) -> String {
    let mut header = vec!["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"];
    if namespace_column {
        header.insert(0, "NAMESPACE");
    }
    let mut rows = vec![header.into_iter().map(String::from).collect::<Vec<_>>()];
    for e in events {
        let mut row = Vec::new();
        if namespace_column {
            row.push(e.listed_namespace().to_string());
        }
        row.extend([
            human_duration((now - e.time).to_std().unwrap_or_default()),
            format!("{:?}", e.kind),
            e.reason.clone(),
            // kubectl's OBJECT is the involved object's kind/name; a container's
            // events name their container in the message.
            object_of(&e.object),
            e.message.clone(),
        ]);
        rows.push(row);
    }
    align_min(&rows, KUBECTL_MIN_WIDTH)
}

/// `pod/NAME` of `pod/NAME/CONTAINER`.
fn object_of(object: &str) -> String {
    object.splitn(3, '/').take(2).collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::EventKind;

    #[test]
    fn table() {
        let now = Utc::now();
        let e = Event {
            time: now - chrono::Duration::seconds(5),
            kind: EventKind::Warning,
            reason: "SystemOOM".into(),
            object: "node/n1".into(),
            message: "System OOM encountered, victim process: tail, pid: 7".into(),
            namespace: None,
        };
        let out = render_events(&[e], false, now);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("LAST SEEN   TYPE"));
        assert!(
            lines[1].starts_with("5s          Warning   SystemOOM   node/n1   System OOM"),
            "{out}"
        );
    }

    /// `kubectl get events -A`'s columns (golden/get-events-all-namespaces.txt): the
    /// node's events in `default`, a container's event under its pod.
    #[test]
    fn all_namespaces_as_kubectl() {
        let now: DateTime<Utc> = "2026-11-30T10:05:00Z".parse().unwrap();
        let event =
            |secs: i64, kind, reason: &str, object: &str, message: &str, ns: Option<&str>| Event {
                time: now - chrono::Duration::seconds(secs),
                kind,
                reason: reason.into(),
                object: object.into(),
                message: message.into(),
                namespace: ns.map(str::to_string),
            };
        let events = [
            event(
                120,
                EventKind::Warning,
                "SystemOOM",
                "node/n1",
                "System OOM encountered",
                None,
            ),
            event(
                5,
                EventKind::Normal,
                "Started",
                "pod/dup/main",
                "Started container main",
                Some("team-a"),
            ),
        ];
        assert_eq!(
            render_events(&events, true, now),
            include_str!("golden/get-events-all-namespaces.txt")
        );
    }
}
