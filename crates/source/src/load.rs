//! One manifest file → one [`StaticPod`]: read, decode, validate, report fields,
//! default, and give it the kubelet's static-pod identity. The daemon
//! ([`load_manifest`]) and `podhost validate` ([`check_manifest`]) run the same code.

use std::path::Path;

use chrono::SecondsFormat;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use super::StaticPod;
use super::decode::{check_kind, decode_pod, parse_document, read_manifest};
use super::defaults::apply_api_defaults;
use super::error::{FieldError, ManifestError, ValueError};
use super::field_report::{FieldReport, field_report};
use super::fields::FieldStatus;
use super::identity::{PodOrigin, apply_identity, pod_uid};
use super::validate::{check_required, dns1123_subdomain, validate_pod};

/// Everything known about one manifest: the pod (or why not) and, once it parsed as a
/// Pod, what podhost does with each field it sets.
#[derive(Debug)]
pub struct ManifestCheck {
    /// The pod as the daemon would run it, or the error that stops it.
    pub pod: Result<StaticPod, ManifestError>,
    /// `metadata.name` as written, when there is one.
    pub name: Option<String>,
    /// Every field the manifest sets, at the level podhost decides it (empty when the
    /// file is not a Pod at all).
    pub fields: Vec<FieldReport>,
}

/// Loads the static pod defined by the manifest at `path` for node `node_name`.
///
/// The file must hold exactly one `v1` Pod of at most 10 MiB, in YAML or JSON, with
/// no unknown fields, that the API server would accept and that sets no field podhost
/// rejects. The returned pod carries API defaults and the kubelet's identity (UID from
/// the content hash, name `<name>-<node>`, namespace, annotations, toleration, phase
/// Pending); fields podhost ignores are listed in [`StaticPod::warnings`].
pub fn load_manifest(path: &Path, node_name: &str) -> Result<StaticPod, ManifestError> {
    check_manifest(path, node_name).pod
}

/// [`load_manifest`], keeping the field report for `podhost validate`.
pub fn check_manifest(path: &Path, node_name: &str) -> ManifestCheck {
    let mut fields = Vec::new();
    let mut name = None;
    let pod = load(path, node_name, &mut fields, &mut name);
    ManifestCheck { pod, name, fields }
}

fn load(
    path: &Path,
    node_name: &str,
    fields: &mut Vec<FieldReport>,
    name: &mut Option<String>,
) -> Result<StaticPod, ManifestError> {
    let bytes = read_manifest(path)?;
    load_bytes(path, node_name, &bytes, fields, name)
}

/// [`load_manifest`] of the bytes already read from `path`.
pub(crate) fn load_bytes(
    path: &Path,
    node_name: &str,
    bytes: &[u8],
    fields: &mut Vec<FieldReport>,
    name: &mut Option<String>,
) -> Result<StaticPod, ManifestError> {
    let doc = parse_document(path, bytes)?;
    load_document(path, PodOrigin::File(path), node_name, &doc, fields, name)
}

/// One parsed Pod document → the pod podhost runs. `label` names the document in
/// errors (the file, or the URL and list item); `origin` gives its identity.
pub(crate) fn load_document(
    label: &Path,
    origin: PodOrigin<'_>,
    node_name: &str,
    doc: &Value,
    fields: &mut Vec<FieldReport>,
    name: &mut Option<String>,
) -> Result<StaticPod, ManifestError> {
    let path = label;
    check_kind(path, doc)?;
    *fields = field_report(doc);
    *name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(String::from);
    check_required(path, doc)?;
    let decoded = decode_pod(path, doc)?;
    let mut errors = validate_pod(&decoded);
    errors.extend(rejected(fields, &errors));
    if !errors.is_empty() {
        return Err(ManifestError::Invalid {
            path: path.to_path_buf(),
            errors,
        });
    }
    admit(path, origin, node_name, decoded, fields)
}

/// The fields the table rejects, unless validation already refused them.
fn rejected(fields: &[FieldReport], errors: &[FieldError]) -> Vec<FieldError> {
    fields
        .iter()
        .filter_map(|f| match f.status {
            FieldStatus::Rejected(why) => Some((f, why)),
            _ => None,
        })
        .filter(|(f, _)| !errors.iter().any(|e| e.field.starts_with(&f.path)))
        .map(|(f, why)| FieldError::bare(&f.path, ValueError::Rejected { why }))
        .collect()
}

/// A valid pod → the static pod the daemon runs.
fn admit(
    path: &Path,
    origin: PodOrigin<'_>,
    node_name: &str,
    decoded: Pod,
    fields: &[FieldReport],
) -> Result<StaticPod, ManifestError> {
    let mut warnings: Vec<String> = fields.iter().filter_map(FieldReport::warning).collect();
    let uid = pod_uid(&decoded, node_name, origin);
    if let Some(given) = decoded.metadata.uid.as_deref()
        && !given.is_empty()
        && given != uid
    {
        warnings.push(format!(
            "metadata.uid {given:?} is replaced by the content hash {uid}, so that every edit of the manifest is detected"
        ));
    }

    let mut pod = decoded;
    apply_api_defaults(&mut pod);
    let seen = chrono::Utc::now().to_rfc3339_opts(SecondsFormat::Nanos, true);
    apply_identity(&mut pod, &uid, node_name, &seen, origin);
    // As the kubelet, which validates the pod under its final name: a manifest name
    // that is valid alone can be too long once the node name is appended.
    let full_name = pod.metadata.name.clone().unwrap_or_default();
    if let Err(why) = dns1123_subdomain(&full_name) {
        return Err(ManifestError::Invalid {
            path: path.to_path_buf(),
            errors: vec![FieldError::invalid(
                "metadata.name",
                full_name,
                ValueError::NameWithNode(Box::new(why)),
            )],
        });
    }

    Ok(StaticPod {
        name: pod.metadata.name.clone().unwrap_or_default(),
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        uid,
        path: path.to_path_buf(),
        warnings,
        pod: std::sync::Arc::new(pod),
    })
}
