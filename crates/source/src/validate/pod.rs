//! Pod-level rules: metadata, the spec's own fields, and the walk over its containers
//! and volumes.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use super::container::{self, Kind};
use super::names::{dns1123_label, dns1123_subdomain, label_value, qualified_name};
use super::{Errs, dns, sysctls, volumes};
use crate::error::ValueError;

/// The API server's limit on the total size of a pod's annotations (keys and values).
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

pub(super) fn validate(pod: &Pod, errs: &mut Errs) {
    metadata(pod, errs);
    let Some(spec) = pod.spec.as_ref() else {
        errs.bare(
            "spec.containers",
            ValueError::Required {
                hint: "add a container to run",
            },
        );
        return;
    };
    pod_fields(spec, errs);
    dns::validate(spec, errs);
    sysctls::validate(spec, errs);
    let volumes = volumes::validate(spec, errs);
    let host_network = spec.host_network == Some(true);
    let lists: [(&str, &[Container], Kind); 2] = [
        (
            "spec.initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
            Kind::Init,
        ),
        ("spec.containers", &spec.containers, Kind::Regular),
    ];
    let mut seen: HashMap<&str, String> = HashMap::new();
    for (list, containers, kind) in lists {
        for (i, c) in containers.iter().enumerate() {
            let at = format!("{list}[{i}]");
            let kind = match kind {
                Kind::Init if c.restart_policy.as_deref() == Some("Always") => Kind::Sidecar,
                other => other,
            };
            container::validate(
                &container::Ctx {
                    at: &at,
                    kind,
                    volumes: &volumes,
                    host_network,
                },
                c,
                errs,
            );
            unique_name(&mut seen, &c.name, at, errs);
        }
    }
    // A manifest may not hold ephemeral containers (the table in `source::fields`
    // rejects them, as the API server does in a create); their names still may not
    // clash with the others', as `podhost debug` adds them under those names.
    for (i, c) in spec.ephemeral_containers.iter().flatten().enumerate() {
        unique_name(
            &mut seen,
            &c.name,
            format!("spec.ephemeralContainers[{i}]"),
            errs,
        );
    }
    for (i, c) in spec.containers.iter().enumerate() {
        if let Err(e) = podhost_model::security::container_security(pod, c, i) {
            let field = e.field().map_or_else(
                || format!("spec.containers[{i}].securityContext"),
                str::to_string,
            );
            errs.bare(field, ValueError::Security(e));
        }
    }
}

fn unique_name<'a>(
    seen: &mut HashMap<&'a str, String>,
    name: &'a str,
    at: String,
    errs: &mut Errs,
) {
    if name.is_empty() {
        return;
    }
    if let Some(first) = seen.get(name) {
        errs.bare(
            format!("{at}.name"),
            ValueError::Duplicate {
                what: "container",
                name: name.to_string(),
                first: first.clone(),
            },
        );
    } else {
        seen.insert(name, at);
    }
}

fn metadata(pod: &Pod, errs: &mut Errs) {
    let meta = &pod.metadata;
    let name = meta.name.as_deref().unwrap_or_default();
    errs.check("metadata.name", name, dns1123_subdomain(name));
    if let Some(ns) = meta.namespace.as_deref()
        && !ns.is_empty()
    {
        errs.check("metadata.namespace", ns, dns1123_label(ns));
    }
    for (key, value) in meta.labels.iter().flatten() {
        let field = format!("metadata.labels.{key}");
        errs.check(&field, key, qualified_name(key));
        errs.check(&field, value, label_value(value));
    }
    let mut total = 0;
    for (key, value) in meta.annotations.iter().flatten() {
        errs.check(
            format!("metadata.annotations.{key}"),
            key,
            qualified_name(&key.to_lowercase()),
        );
        total += key.len() + value.len();
    }
    if total > MAX_ANNOTATIONS_BYTES {
        errs.bare(
            "metadata.annotations",
            ValueError::Forbidden {
                why: "above 262144 bytes in total (keys and values); move large data into a file",
            },
        );
    }
}

fn pod_fields(spec: &PodSpec, errs: &mut Errs) {
    if spec.containers.is_empty() {
        errs.bare(
            "spec.containers",
            ValueError::Required {
                hint: "add a container to run",
            },
        );
    }
    if let Some(rp) = spec.restart_policy.as_deref() {
        errs.one_of("spec.restartPolicy", rp, &["Always", "OnFailure", "Never"]);
    }
    if let Some(tgps) = spec.termination_grace_period_seconds
        && tgps < 0
    {
        errs.invalid(
            "spec.terminationGracePeriodSeconds",
            tgps,
            ValueError::NegativeGracePeriod,
        );
    }
    if let Some(ads) = spec.active_deadline_seconds
        && !(1..=i64::from(i32::MAX)).contains(&ads)
    {
        errs.invalid(
            "spec.activeDeadlineSeconds",
            ads,
            ValueError::OutOfRange {
                min: 1,
                max: i32::MAX.into(),
            },
        );
    }
    if let Some(policy) = spec.dns_policy.as_deref() {
        errs.one_of(
            "spec.dnsPolicy",
            policy,
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        );
        if policy == "None" && spec.dns_config.is_none() {
            errs.bare(
                "spec.dnsConfig",
                ValueError::Required {
                    hint: "dnsPolicy None takes its nameservers from dnsConfig",
                },
            );
        }
    }
    for (field, value) in [("hostname", &spec.hostname), ("subdomain", &spec.subdomain)] {
        if let Some(v) = value.as_deref()
            && !v.is_empty()
        {
            errs.check(format!("spec.{field}"), v, dns1123_label(v));
        }
    }
    if spec.share_process_namespace == Some(true) && spec.host_pid == Some(true) {
        errs.invalid(
            "spec.shareProcessNamespace",
            "true",
            ValueError::ShareProcessNamespaceWithHostPid,
        );
    }
    if let Some(policy) = spec
        .security_context
        .as_ref()
        .and_then(|s| s.fs_group_change_policy.as_deref())
    {
        errs.one_of(
            "spec.securityContext.fsGroupChangePolicy",
            policy,
            &["OnRootMismatch", "Always"],
        );
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let at = format!("spec.tolerations[{i}]");
        if let Some(op) = t.operator.as_deref() {
            errs.one_of(format!("{at}.operator"), op, &["Exists", "Equal"]);
        }
        if let Some(effect) = t.effect.as_deref()
            && !effect.is_empty()
        {
            errs.one_of(
                format!("{at}.effect"),
                effect,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            );
        }
    }
}
