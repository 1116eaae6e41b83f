//! `podhost get events`: LAST SEEN TYPE REASON OBJECT MESSAGE, as kubectl.

use chrono::{DateTime, Utc};

use super::age::human_duration;
use super::table::align;
use crate::status::Event;

pub fn render_events(events: &[Event], now: DateTime<Utc>) -> String {
    let mut rows = vec![
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
            .map(String::from)
            .to_vec(),
    ];
    for e in events {
        rows.push(vec![
            human_duration((now - e.time).to_std().unwrap_or_default()),
            format!("{:?}", e.kind),
            e.reason.clone(),
            e.object.clone(),
            e.message.clone(),
        ]);
    }
    align(&rows)
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
        };
        let out = render_events(&[e], now);
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("LAST SEEN   TYPE"));
        assert!(
            lines[1].starts_with("5s          Warning   SystemOOM   node/n1   System OOM"),
            "{out}"
        );
    }
}
