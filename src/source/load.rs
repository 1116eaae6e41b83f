//! One manifest file → one [`StaticPod`]: read, decode, validate, warn, default, and
//! give it the kubelet's static-pod identity.

use std::path::Path;

use chrono::SecondsFormat;

use super::StaticPod;
use super::decode::{check_kind, decode_pod, parse_document, read_manifest};
use super::defaults::apply_api_defaults;
use super::error::{FieldError, ManifestError, ValueError};
use super::identity::{apply_identity, static_pod_uid};
use super::validate::{check_required, dns1123_subdomain, validate};
use super::warnings::unhonoured_fields;

/// Loads the static pod defined by the manifest at `path` for node `node_name`.
///
/// The file must hold exactly one `v1` Pod of at most 10 MiB, in YAML or JSON, with
/// no unknown fields. The returned pod carries API defaults and the kubelet's identity
/// (UID from the content hash, name `<name>-<node>`, namespace, annotations,
/// toleration, phase Pending); fields podhost does not honour are listed in
/// [`StaticPod::warnings`].
pub fn load_manifest(path: &Path, node_name: &str) -> Result<StaticPod, ManifestError> {
    let bytes = read_manifest(path)?;
    let doc = parse_document(path, &bytes)?;
    check_kind(path, &doc)?;
    check_required(path, &doc)?;
    let decoded = decode_pod(path, &doc)?;
    validate(path, &decoded)?;

    let mut warnings = unhonoured_fields(&doc);
    let uid = static_pod_uid(&decoded, node_name, path);
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
    apply_identity(&mut pod, &uid, node_name, &seen);
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
        pod,
    })
}
