//! The manifest URL's body → pods: empty → none; one Pod; or a `v1` PodList whose
//! items are each checked as a manifest file is (`load_document`). As the kubelet, an
//! answer with any unusable item is refused whole (the previous pods stay), and a
//! second pod of the same namespace/name is dropped and reported.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::decode::parse_document;
use crate::identity::PodOrigin;
use crate::load::load_document;
use crate::{ManifestError, ScanResult, StaticPod};

/// The pods served in `body` by `url`, for node `node_name`: `Ok` with the pods (and
/// the duplicates it dropped as errors), or `Err` with every reason the answer cannot
/// be used. A body of only whitespace means no pods, as an empty one.
pub fn pods_from_body(
    url: &str,
    body: &[u8],
    node_name: &str,
) -> Result<ScanResult, Vec<ManifestError>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(ScanResult::default());
    }
    let label = Path::new(url);
    let doc = parse_document(label, body).map_err(|e| vec![e])?;
    let items = match doc.get("kind").and_then(Value::as_str) {
        None | Some("Pod") => vec![(label.to_path_buf(), doc)],
        Some("PodList") => list_items(url, doc).map_err(|e| vec![e])?,
        Some(other) => {
            return Err(vec![ManifestError::UrlWrongKind {
                url: url.to_string(),
                found: format!("kind {other:?}"),
            }]);
        }
    };

    let mut pods = Vec::new();
    let mut errors = Vec::new();
    for (item_label, item) in items {
        let (mut fields, mut name) = (Vec::new(), None);
        match load_document(
            &item_label,
            PodOrigin::Url(url),
            node_name,
            &item,
            &mut fields,
            &mut name,
        ) {
            Ok(pod) => pods.push(pod),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(unique(pods))
}

/// A PodList's items, each labelled `<url> items[i]` and given `kind: Pod` and
/// `apiVersion: v1` when it leaves them out (lists written by hand usually do).
fn list_items(url: &str, doc: Value) -> Result<Vec<(PathBuf, Value)>, ManifestError> {
    let version = doc.get("apiVersion").and_then(Value::as_str);
    if version != Some("v1") {
        return Err(ManifestError::WrongApiVersion {
            path: url.into(),
            found: version.map_or("nothing".to_string(), |v| format!("{v:?}")),
        });
    }
    let items = match doc.get("items") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(_) => {
            return Err(ManifestError::UrlWrongKind {
                url: url.to_string(),
                found: "a PodList whose items is not a list".to_string(),
            });
        }
    };
    Ok(items
        .into_iter()
        .enumerate()
        .map(|(i, mut item)| {
            if let Some(obj) = item.as_object_mut() {
                obj.entry("kind").or_insert_with(|| "Pod".into());
                obj.entry("apiVersion").or_insert_with(|| "v1".into());
            }
            (PathBuf::from(format!("{url} items[{i}]")), item)
        })
        .collect())
}

/// Keeps the first pod of each namespace/name, reporting the others (as a scan of the
/// manifest dir does).
fn unique(pods: Vec<StaticPod>) -> ScanResult {
    let mut result = ScanResult::default();
    let mut first: HashMap<(String, String), PathBuf> = HashMap::new();
    for pod in pods {
        crate::scan::add_unique(&mut result, &mut first, pod);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{ANNOTATION_CONFIG_SOURCE, http_pod_uid};

    const URL: &str = "http://10.0.0.1:8080/pods";

    fn pod_yaml(name: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: busybox\n"
        )
    }

    #[test]
    fn empty_and_blank_bodies_are_no_pods() {
        for body in [&b""[..], b"\n  \n"] {
            let scan = pods_from_body(URL, body, "node").unwrap();
            assert!(scan.pods.is_empty() && scan.errors.is_empty());
        }
    }

    #[test]
    fn a_single_pod_in_yaml_gets_the_http_identity() {
        let scan = pods_from_body(URL, pod_yaml("web").as_bytes(), "Node1").unwrap();
        assert!(scan.errors.is_empty(), "{:?}", scan.errors);
        let [pod] = &scan.pods[..] else {
            panic!("one pod expected: {:?}", scan.pods)
        };
        assert_eq!(pod.name, "web-node1");
        assert_eq!(pod.path, Path::new(URL));
        let ann = pod.pod.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann[ANNOTATION_CONFIG_SOURCE], "http");
        assert_eq!(pod.pod.spec.as_ref().unwrap().tolerations, None);
        // The UID hashes the decoded pod (before defaults) and the URL only.
        let decoded: k8s_openapi::api::core::v1::Pod =
            serde_yaml_ng::from_str(&pod_yaml("web")).unwrap();
        assert_eq!(pod.uid, http_pod_uid(&decoded, URL));
        let other_node = pods_from_body(URL, pod_yaml("web").as_bytes(), "node2").unwrap();
        assert_eq!(other_node.pods[0].uid, pod.uid);
    }

    #[test]
    fn a_pod_list_in_json_with_bare_items() {
        let body = r#"{"apiVersion":"v1","kind":"PodList","items":[
            {"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i"}]}},
            {"apiVersion":"v1","kind":"Pod","metadata":{"name":"b","namespace":"kube-system"},
             "spec":{"containers":[{"name":"c","image":"i"}]}}]}"#;
        let scan = pods_from_body(URL, body.as_bytes(), "n").unwrap();
        assert!(scan.errors.is_empty(), "{:?}", scan.errors);
        let names: Vec<_> = scan
            .pods
            .iter()
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .collect();
        assert_eq!(names, ["default/a-n", "kube-system/b-n"]);
        assert_ne!(scan.pods[0].uid, scan.pods[1].uid);
        assert_eq!(scan.pods[1].path, Path::new(&format!("{URL} items[1]")));
        let empty = r#"{"apiVersion":"v1","kind":"PodList","items":[]}"#;
        assert!(
            pods_from_body(URL, empty.as_bytes(), "n")
                .unwrap()
                .pods
                .is_empty()
        );
    }

    #[test]
    fn one_bad_item_refuses_the_whole_answer_naming_the_item() {
        let body = format!(
            "apiVersion: v1\nkind: PodList\nitems:\n- {}\n- metadata: {{name: b}}\n  spec: {{containers: [{{name: c}}]}}\n",
            serde_json::to_string(&serde_yaml_ng::from_str::<Value>(&pod_yaml("a")).unwrap())
                .unwrap()
        );
        let errors = pods_from_body(URL, body.as_bytes(), "n").unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        let text = errors[0].to_string();
        assert!(
            text.starts_with(&format!("manifest {URL} items[1]: spec.containers[0]")),
            "{text}"
        );
        assert!(text.contains("\"image\" is required"), "{text}");
    }

    #[test]
    fn duplicates_are_dropped_and_reported() {
        let item = serde_yaml_ng::from_str::<Value>(&pod_yaml("a")).unwrap();
        let mut changed = item.clone();
        changed["spec"]["containers"][0]["image"] = "other".into();
        let body = serde_json::json!({"apiVersion":"v1","kind":"PodList","items":[item, changed]});
        let scan = pods_from_body(URL, body.to_string().as_bytes(), "n").unwrap();
        assert_eq!(scan.pods.len(), 1);
        assert_eq!(scan.errors.len(), 1);
        assert!(
            scan.errors[0].to_string().contains("is already defined by"),
            "{}",
            scan.errors[0]
        );
    }

    #[test]
    fn other_kinds_and_versions_are_refused() {
        let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n";
        let errors = pods_from_body(URL, deployment.as_bytes(), "n").unwrap_err();
        let text = errors[0].to_string();
        assert!(
            text.contains("expected kind Pod or PodList, found kind \"Deployment\""),
            "{text}"
        );
        let list = "apiVersion: v2\nkind: PodList\nitems: []\n";
        let errors = pods_from_body(URL, list.as_bytes(), "n").unwrap_err();
        assert!(
            errors[0].to_string().contains("apiVersion"),
            "{}",
            errors[0]
        );
        let errors = pods_from_body(URL, b"kind: Pod\nmetadata: [", "n").unwrap_err();
        assert!(
            errors[0].to_string().contains("invalid YAML"),
            "{}",
            errors[0]
        );
    }
}
