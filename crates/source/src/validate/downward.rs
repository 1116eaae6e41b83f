//! Downward API references (`fieldRef`, `resourceFieldRef`) in env and in volumes:
//! each place allows its own set of fields, as the API server's
//! `validEnvDownwardAPIFieldPathExpressions` and `validVolumeDownwardAPIFieldPathExpressions`.

use k8s_openapi::api::core::v1::{ObjectFieldSelector, ResourceFieldSelector};

use super::Errs;
use crate::error::ValueError;
use podhost_model::quantity::Quantity;

/// Where a reference is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Use {
    /// `env[*].valueFrom`.
    Env,
    /// A `downwardAPI` volume (or projection) item.
    Volume,
}

const ENV_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.labels['<KEY>']",
    "metadata.annotations['<KEY>']",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

const VOLUME_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.labels",
    "metadata.annotations",
    "metadata.labels['<KEY>']",
    "metadata.annotations['<KEY>']",
];

const RESOURCES: &[&str] = &[
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.hugepages-<size>",
    "requests.hugepages-<size>",
];

const CPU_DIVISORS: &[&str] = &["1m", "1"];
const BYTE_DIVISORS: &[&str] = &[
    "1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei",
];

pub(super) fn field_ref(at: &str, f: &ObjectFieldSelector, place: Use, errs: &mut Errs) {
    if let Some(v) = f.api_version.as_deref()
        && !v.is_empty()
    {
        errs.one_of(format!("{at}.apiVersion"), v, &["v1"]);
    }
    let path = f.field_path.as_str();
    let field = format!("{at}.fieldPath");
    if path.is_empty() {
        errs.bare(
            field,
            ValueError::Required {
                hint: "name the pod field, e.g. metadata.name",
            },
        );
        return;
    }
    let subscripted = ["metadata.labels", "metadata.annotations"]
        .iter()
        .any(|prefix| {
            path.strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix("['"))
                .and_then(|rest| rest.strip_suffix("']"))
                .is_some_and(|key| !key.is_empty())
        });
    let allowed = match place {
        Use::Env => ENV_FIELDS,
        Use::Volume => VOLUME_FIELDS,
    };
    if !subscripted && !allowed.contains(&path) {
        errs.invalid(field, path, ValueError::NotOneOf { allowed });
    }
}

pub(super) fn resource_field_ref(at: &str, r: &ResourceFieldSelector, place: Use, errs: &mut Errs) {
    if place == Use::Volume && r.container_name.as_deref().unwrap_or_default().is_empty() {
        errs.bare(
            format!("{at}.containerName"),
            ValueError::Required {
                hint: "a volume belongs to no container: name the one whose resources to use",
            },
        );
    }
    let resource = r.resource.as_str();
    let known = RESOURCES[..6].contains(&resource)
        || ["limits.hugepages-", "requests.hugepages-"]
            .iter()
            .any(|p| resource.strip_prefix(p).is_some_and(|s| !s.is_empty()));
    if !known {
        errs.invalid(
            format!("{at}.resource"),
            resource,
            ValueError::NotOneOf { allowed: RESOURCES },
        );
        return;
    }
    let Some(divisor) = &r.divisor else {
        return;
    };
    let field = format!("{at}.divisor");
    let q = match Quantity::parse(&divisor.0) {
        Ok(q) => q,
        Err(e) => return errs.invalid(field, &divisor.0, ValueError::Quantity(e)),
    };
    if q.is_zero() {
        return; // unset
    }
    let allowed = if resource.ends_with(".cpu") {
        CPU_DIVISORS
    } else {
        BYTE_DIVISORS
    };
    let ok = allowed
        .iter()
        .any(|a| Quantity::parse(a).is_ok_and(|a| a == q));
    if !ok {
        errs.invalid(field, &divisor.0, ValueError::NotOneOf { allowed });
    }
}
