//! The status store on a real disk: batching, ordering, removal, and readers that never
//! wait for the writer.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::StatusStore;
use super::writer::STATUS_FILE;
use podhost_disk::Layout;

/// A one-container pod `p-<uid>` (also for other modules' tests of the store).
pub(crate) fn pod(uid: &str) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("p-{uid}"), "namespace": "default", "uid": uid},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}
        }))
        .unwrap(),
    )
}

fn store() -> (tempfile::TempDir, Layout, Arc<StatusStore>) {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path().join("root"), dir.path().join("logs"));
    let store = Arc::new(StatusStore::load(layout.clone(), "node"));
    (dir, layout, store)
}

fn set_message(store: &StatusStore, uid: &str, n: usize) {
    store.update_status(uid, |s| s.message = Some(n.to_string()));
}

fn on_disk_message(layout: &Layout, uid: &str) -> Option<String> {
    let text = std::fs::read_to_string(layout.pod_dir(uid).join(STATUS_FILE)).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["pod"]["status"]["message"].as_str().map(str::to_string)
}

#[test]
fn a_burst_of_changes_made_during_one_write_costs_one_more_write() {
    let (_dir, layout, store) = store();
    store.admit(&pod("a"));
    store.flush();
    let before = store.writer_stats().writes;
    // A write in progress (the gate held) while 500 changes arrive.
    let gate = store.shared_for_tests().gate_for_tests();
    for n in 0..500 {
        set_message(&store, "a", n);
    }
    drop(gate);
    store.flush();
    assert_eq!(
        store.writer_stats().writes - before,
        1,
        "one write for the burst"
    );
    assert_eq!(on_disk_message(&layout, "a").as_deref(), Some("499"));
}

#[test]
fn a_pod_admitted_with_its_first_status_is_written_once() {
    let (_dir, layout, store) = store();
    store.admit_with(&pod("a"), |s| s.qos_class = Some("BestEffort".into()));
    store.flush();
    assert_eq!(
        store.writer_stats().writes,
        1,
        "one write for admission and status"
    );
    let text = std::fs::read_to_string(layout.pod_dir("a").join(STATUS_FILE)).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["pod"]["status"]["qosClass"], "BestEffort");
    assert_eq!(v["pod"]["status"]["phase"], "Pending");
}

#[test]
fn readers_and_mutators_never_wait_for_a_write_in_progress() {
    let (_dir, _layout, store) = store();
    store.admit(&pod("a"));
    let gate = store.shared_for_tests().gate_for_tests();
    // Same thread as the held gate: any wait for it would deadlock the test.
    set_message(&store, "a", 1);
    store.pod_event(
        "a",
        super::EventKind::Warning,
        "R",
        "pod/p-a",
        "m".to_string(),
    );
    assert_eq!(store.pods().len(), 1);
    assert_eq!(store.get("a").unwrap().status.message.as_deref(), Some("1"));
    drop(gate);
}

#[test]
fn concurrent_changes_are_written_in_order_and_the_newest_lands_last() {
    let (_dir, layout, store) = store();
    for uid in ["a", "b"] {
        store.admit(&pod(uid));
    }
    let threads: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|uid| {
            let store = store.clone();
            std::thread::spawn(move || {
                for n in 0..300 {
                    set_message(&store, uid, n);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    store.flush();
    let history = store.writer_stats().history;
    for uid in ["a", "b"] {
        let versions: Vec<u64> = history
            .iter()
            .filter(|(u, _)| u == uid)
            .map(|(_, v)| *v)
            .collect();
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "{uid}: versions written out of order: {versions:?}"
        );
        assert_eq!(
            versions.last().copied(),
            Some(store.get(uid).unwrap().version),
            "{uid}: the newest state is the last written"
        );
        assert_eq!(on_disk_message(&layout, uid).as_deref(), Some("299"));
    }
}

#[test]
fn no_write_recreates_a_pod_dir_removed_after_stop_persisting() {
    let (_dir, layout, store) = store();
    store.admit(&pod("a"));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                set_message(&store, "a", n);
                n += 1;
            }
        })
    };
    // Let some writes happen first.
    while store.writer_stats().writes < 3 {
        std::thread::yield_now();
    }
    store.stop_persisting("a");
    std::fs::remove_dir_all(layout.pod_dir("a")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    churn.join().unwrap();
    store.flush();
    assert!(
        !layout.pod_dir("a").exists(),
        "a late write recreated the pod dir"
    );
    store.remove("a");
    assert!(store.get("a").is_none());
}

#[test]
fn the_latest_state_survives_a_new_store() {
    let (_dir, layout, store) = store();
    store.admit(&pod("a"));
    set_message(&store, "a", 7);
    // Dropping the store writes what is queued (the daemon's stop flushes too).
    drop(Arc::into_inner(store).unwrap());
    let again = StatusStore::load(layout.clone(), "node");
    let rec = again.get("a").unwrap();
    assert_eq!(rec.status.message.as_deref(), Some("7"));
    let leftovers: Vec<_> = std::fs::read_dir(layout.pod_dir("a"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != STATUS_FILE)
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
}

#[test]
fn the_admitted_pod_is_shared_with_whoever_admitted_it_not_copied() {
    let (_dir, _layout, store) = store();
    let mut stamped = (*pod("a")).clone();
    stamped.metadata.creation_timestamp = Some(super::k8s_time(chrono::Utc::now()));
    let stamped = Arc::new(stamped);
    store.admit_with(&stamped, |s| s.qos_class = Some("BestEffort".into()));
    store.update_status("a", |s| s.message = Some("m".into()));
    let rec = store.get("a").unwrap();
    assert!(Arc::ptr_eq(&rec.admitted, &stamped), "one copy of the pod");
    assert_eq!(rec.status.message.as_deref(), Some("m"));
    // A source that did not stamp its pod: the store stamps its own copy.
    store.admit(&pod("b"));
    assert!(
        store
            .get("b")
            .unwrap()
            .admitted
            .metadata
            .creation_timestamp
            .is_some()
    );
}

#[test]
fn the_record_on_disk_is_the_pod_with_its_status_as_the_api_writes_it() {
    let (_dir, layout, store) = store();
    store.admit(&pod("a"));
    set_message(&store, "a", 3);
    store.set_deletion_timestamp("a", super::k8s_time(chrono::Utc::now()));
    store.flush();
    let text = std::fs::read_to_string(layout.pod_dir("a").join(STATUS_FILE)).unwrap();
    let on_disk: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rec = store.get("a").unwrap();
    assert_eq!(on_disk["pod"], serde_json::to_value(rec.to_pod()).unwrap());
    assert_eq!(on_disk["pod"]["status"]["message"], "3");
    assert!(on_disk["pod"]["metadata"]["deletionTimestamp"].is_string());
    // Read back (and as older daemons wrote it: `{"pod": <v1.Pod>, "events": []}`).
    let old = serde_json::json!({"pod": serde_json::to_value(rec.to_pod()).unwrap(), "events": []});
    let back: super::PodRecord = serde_json::from_value(old).unwrap();
    assert_eq!(back.status.message.as_deref(), Some("3"));
    assert!(back.admitted.status.is_none(), "the status is kept apart");
    assert_eq!(
        serde_json::to_value(back.into_pod()).unwrap(),
        on_disk["pod"]
    );
}

#[test]
fn a_removed_pods_events_stay_listed_for_an_hour_with_its_namespace() {
    let (_dir, _layout, store) = store();
    store.admit(&pod("gone"));
    store.pod_event(
        "gone",
        super::EventKind::Normal,
        "Started",
        "pod/p-gone/main",
        "started".into(),
    );
    store.remove("gone");
    let kept = store.departed_events();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].reason, "Started");
    assert_eq!(kept[0].namespace.as_deref(), Some("default"));
    assert!(kept[0].is_about("pod/p-gone"));
    assert!(!kept[0].is_about("pod/p-go"));
}

#[test]
fn departed_events_expire_an_hour_after_their_pod_went_and_are_capped() {
    use super::events::{DEPARTED_EVENTS_TTL, Departed, MAX_DEPARTED_EVENTS};
    let event = |n: usize| super::Event {
        time: chrono::Utc::now(),
        kind: super::EventKind::Normal,
        reason: format!("r{n}"),
        object: "pod/p".into(),
        message: String::new(),
        namespace: None,
    };
    let now = chrono::Utc::now();
    let mut departed = Departed::default();
    departed.keep(
        now - DEPARTED_EVENTS_TTL - chrono::TimeDelta::seconds(1),
        vec![event(0)],
    );
    departed.keep(now - chrono::TimeDelta::minutes(59), vec![event(1)]);
    let kept: Vec<String> = departed
        .current(now)
        .into_iter()
        .map(|e| e.reason)
        .collect();
    assert_eq!(kept, ["r1"]);
    departed.keep(now, (0..MAX_DEPARTED_EVENTS + 5).map(event).collect());
    let kept = departed.current(now);
    assert_eq!(kept.len(), MAX_DEPARTED_EVENTS);
    assert_eq!(kept[0].reason, "r5");
}
