//! The Volumes section, as kubectl's `describeVolumes`: each volume's type line and
//! the fields kubectl shows for it.

use k8s_openapi::api::core::v1::Volume;

use super::tabbed::Tabbed;

pub fn describe_volumes(w: &mut Tabbed, volumes: &[Volume]) {
    if volumes.is_empty() {
        w.write(0, "Volumes:\t<none>\n");
        return;
    }
    w.write(0, "Volumes:\n");
    for v in volumes {
        w.write(1, &format!("{}:\n", v.name));
        // kubectl writes the first line at level 2 and the others with four spaces
        // of their own: the same text.
        for line in volume_lines(v) {
            w.write(2, &format!("{line}\n"));
        }
    }
}

fn optional(o: Option<bool>) -> bool {
    o.unwrap_or(false)
}

/// Go's `%v` of a `*bool`, as kubectl prints a projected source's Optional.
fn go_optional(o: Option<bool>) -> String {
    o.map_or_else(|| "<nil>".to_string(), |b| b.to_string())
}

fn volume_lines(v: &Volume) -> Vec<String> {
    if let Some(h) = &v.host_path {
        return vec![
            "Type:\tHostPath (bare host directory volume)".into(),
            format!("Path:\t{}", h.path),
            format!(
                "HostPathType:\t{}",
                h.type_
                    .as_deref()
                    .filter(|t| !t.is_empty())
                    .unwrap_or("<none>")
            ),
        ];
    }
    if let Some(e) = &v.empty_dir {
        let size = e
            .size_limit
            .as_ref()
            .map(|q| q.0.clone())
            .filter(|q| !q.is_empty() && q != "0")
            .unwrap_or_else(|| "<unset>".into());
        return vec![
            "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)".into(),
            format!("Medium:\t{}", e.medium.as_deref().unwrap_or_default()),
            format!("SizeLimit:\t{size}"),
        ];
    }
    if let Some(s) = &v.secret {
        return vec![
            "Type:\tSecret (a volume populated by a Secret)".into(),
            format!(
                "SecretName:\t{}",
                s.secret_name.as_deref().unwrap_or_default()
            ),
            format!("Optional:\t{}", optional(s.optional)),
        ];
    }
    if let Some(c) = &v.config_map {
        return vec![
            "Type:\tConfigMap (a volume populated by a ConfigMap)".into(),
            format!("Name:\t{}", c.name),
            format!("Optional:\t{}", optional(c.optional)),
        ];
    }
    if let Some(p) = &v.projected {
        let mut lines = vec![
            "Type:\tProjected (a volume that contains injected data from multiple sources)"
                .to_string(),
        ];
        for s in p.sources.iter().flatten() {
            if let Some(secret) = &s.secret {
                lines.push(format!("SecretName:\t{}", secret.name));
                lines.push(format!(
                    "SecretOptionalName:\t{}",
                    go_optional(secret.optional)
                ));
            } else if s.downward_api.is_some() {
                lines.push("DownwardAPI:\ttrue".into());
            } else if let Some(cm) = &s.config_map {
                lines.push(format!("ConfigMapName:\t{}", cm.name));
                lines.push(format!("ConfigMapOptional:\t{}", go_optional(cm.optional)));
            } else if let Some(token) = &s.service_account_token {
                lines.push(format!(
                    "TokenExpirationSeconds:\t{}",
                    token.expiration_seconds.unwrap_or(3600)
                ));
            }
        }
        return lines;
    }
    if let Some(d) = &v.downward_api {
        let mut lines = vec![
            "Type:\tDownwardAPI (a volume populated by information about the pod)".to_string(),
            "Items:".into(),
        ];
        for item in d.items.iter().flatten() {
            if let Some(f) = &item.field_ref {
                lines.push(format!("  {} -> {}", f.field_path, item.path));
            }
            if let Some(r) = &item.resource_field_ref {
                lines.push(format!("  {} -> {}", r.resource, item.path));
            }
        }
        return lines;
    }
    if let Some(c) = &v.persistent_volume_claim {
        return vec![
            "Type:\tPersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same namespace)".into(),
            format!("ClaimName:\t{}", c.claim_name),
            format!("ReadOnly:\t{}", optional(c.read_only)),
        ];
    }
    if let Some(i) = &v.image {
        return vec![
            "Type:\tImage (a container image or OCI artifact)".into(),
            format!("Reference:\t{}", i.reference.as_deref().unwrap_or_default()),
            format!(
                "PullPolicy:\t{}",
                i.pull_policy.as_deref().unwrap_or_default()
            ),
        ];
    }
    vec!["<unknown>".into()]
}
