//! The effective security settings of one container, with the kubelet's semantics:
//! the container's securityContext wins over the pod's for the fields both have
//! (runAsUser, runAsGroup, runAsNonRoot, seccompProfile, appArmorProfile); the rest
//! come from one level only. Capabilities follow containerd's rules, and the
//! kubelet's runAsNonRoot check is [`verify_run_as_non_root`].

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, SecurityContext};

pub use podhost_model_core::capabilities::{ALL_CAPABILITIES, DEFAULT_CAPABILITIES};

/// A seccomp or AppArmor profile choice, as `seccompProfile`/`appArmorProfile` give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileChoice {
    Unconfined,
    RuntimeDefault,
    /// The `localhostProfile` value.
    Localhost(String),
}

/// `supplementalGroupsPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupsPolicy {
    /// The image's /etc/group memberships of the user are added (the default).
    #[default]
    Merge,
    /// Only the pod's groups: runAsGroup, fsGroup, supplementalGroups.
    Strict,
}

/// The settings of one container that decide how it is confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSecurity {
    pub run_as_user: Option<u32>,
    pub run_as_group: Option<u32>,
    pub run_as_non_root: bool,
    /// The pod's supplementalGroups and fsGroup, in that order, without duplicates.
    pub pod_groups: Vec<u32>,
    pub groups_policy: GroupsPolicy,
    /// Recorded now; applied to volumes when volumes land.
    pub fs_group: Option<u32>,
    pub privileged: bool,
    /// `no_new_privs`: set only when allowPrivilegeEscalation is false (kubelet).
    pub no_new_privileges: bool,
    /// The final capability set (bounding = effective = permitted; no inheritable or
    /// ambient), `CAP_` names in number order.
    pub capabilities: Vec<String>,
    pub read_only_root: bool,
    /// procMount: Unmasked (no masked or read-only /proc paths).
    pub proc_unmasked: bool,
    /// None: the pod says nothing (the node's default applies).
    pub seccomp: Option<ProfileChoice>,
    pub apparmor: Option<ProfileChoice>,
}

/// Why a securityContext cannot be used: API validation would refuse a value (the
/// manifest is rejected), or the kubelet's runAsNonRoot check refuses the container
/// (`CreateContainerConfigError`, with the kubelet's words). `field` is the JSON path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecurityError {
    /// A user or group id is negative or above the largest valid one.
    #[error("{field}: {value} is not a valid id (0 … 4294967294)")]
    BadId { field: String, value: i64 },
    /// `capabilities.add`/`drop` names a capability Linux does not have.
    #[error("{field}: unknown capability {name:?}")]
    UnknownCapability { field: String, name: String },
    /// A seccomp or AppArmor profile type other than the three the API knows.
    #[error(
        "{field}: unknown profile type {value:?} (use RuntimeDefault, Unconfined or Localhost)"
    )]
    BadProfileType { field: String, value: String },
    /// A `Localhost` profile without `localhostProfile`.
    #[error("{field}: type Localhost needs localhostProfile")]
    MissingLocalhostProfile { field: String },
    /// Two settings that exclude each other (e.g. privileged without escalation).
    #[error("{field}: {why}")]
    Conflict { field: String, why: &'static str },
    /// An enum-like field with a value the API does not know.
    #[error("{field}: unknown value {value:?} (use {allowed})")]
    BadValue {
        field: String,
        value: String,
        allowed: &'static str,
    },
    /// runAsNonRoot with `runAsUser: 0`.
    #[error("container's runAsUser breaks non-root policy (pod: {pod:?}, container: {container})")]
    RunAsUserRoot { pod: String, container: String },
    /// runAsNonRoot, no runAsUser, and the image's user is uid 0.
    #[error(
        "container has runAsNonRoot and image will run as root (pod: {pod:?}, container: {container})"
    )]
    ImageRunsAsRoot { pod: String, container: String },
    /// runAsNonRoot, no runAsUser, and the image names a user its /etc/passwd lacks.
    #[error(
        "container has runAsNonRoot and image has non-numeric user ({user}), cannot verify user is non-root (pod: {pod:?}, container: {container})"
    )]
    UnverifiableImageUser {
        user: String,
        pod: String,
        container: String,
    },
}

impl SecurityError {
    /// The JSON path of the refused field, when the error is about one.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::BadId { field, .. }
            | Self::UnknownCapability { field, .. }
            | Self::BadProfileType { field, .. }
            | Self::MissingLocalhostProfile { field }
            | Self::Conflict { field, .. }
            | Self::BadValue { field, .. } => Some(field),
            Self::RunAsUserRoot { .. }
            | Self::ImageRunsAsRoot { .. }
            | Self::UnverifiableImageUser { .. } => None,
        }
    }
}

/// The effective settings of container `c` (index `index` of spec.containers) of `pod`.
pub fn container_security(
    pod: &Pod,
    c: &Container,
    index: usize,
) -> Result<ContainerSecurity, SecurityError> {
    let empty_pod = PodSecurityContext::default();
    let empty_c = SecurityContext::default();
    let spec = pod.spec.as_ref();
    let psc = spec
        .and_then(|s| s.security_context.as_ref())
        .unwrap_or(&empty_pod);
    let csc = c.security_context.as_ref().unwrap_or(&empty_c);
    let cfield = |name: &str| format!("spec.containers[{index}].securityContext.{name}");
    let pfield = |name: &str| format!("spec.securityContext.{name}");
    let pick_id = |name: &str, cv: Option<i64>, pv: Option<i64>| match (cv, pv) {
        (Some(v), _) => id(&cfield(name), v).map(Some),
        (None, Some(v)) => id(&pfield(name), v).map(Some),
        (None, None) => Ok(None),
    };
    let run_as_user = pick_id("runAsUser", csc.run_as_user, psc.run_as_user)?;
    let run_as_group = pick_id("runAsGroup", csc.run_as_group, psc.run_as_group)?;
    let fs_group = psc
        .fs_group
        .map(|v| id(&pfield("fsGroup"), v))
        .transpose()?;
    let mut pod_groups: Vec<u32> = Vec::new();
    for (i, g) in psc.supplemental_groups.iter().flatten().enumerate() {
        pod_groups.push(id(&pfield(&format!("supplementalGroups[{i}]")), *g)?);
    }
    pod_groups.extend(fs_group);
    dedup_keep_order(&mut pod_groups);
    let groups_policy = match psc.supplemental_groups_policy.as_deref() {
        None | Some("Merge") => GroupsPolicy::Merge,
        Some("Strict") => GroupsPolicy::Strict,
        Some(other) => {
            return Err(SecurityError::BadValue {
                field: pfield("supplementalGroupsPolicy"),
                value: other.to_string(),
                allowed: "Merge or Strict",
            });
        }
    };
    let privileged = csc.privileged.unwrap_or(false);
    let proc_unmasked = match csc.proc_mount.as_deref() {
        None | Some("Default") => false,
        Some("Unmasked") => true,
        Some(other) => {
            return Err(SecurityError::BadValue {
                field: cfield("procMount"),
                value: other.to_string(),
                allowed: "Default or Unmasked",
            });
        }
    };
    let capabilities = capability_set(csc, privileged, &cfield("capabilities"))?;
    if csc.allow_privilege_escalation == Some(false)
        && (privileged || capabilities.iter().any(|c| c == "CAP_SYS_ADMIN"))
    {
        return Err(SecurityError::Conflict {
            field: cfield("allowPrivilegeEscalation"),
            why: "cannot be false when the container is privileged or has CAP_SYS_ADMIN",
        });
    }
    let seccomp = match &csc.seccomp_profile {
        Some(p) => Some(profile(
            &cfield("seccompProfile"),
            &p.type_,
            p.localhost_profile.as_deref(),
        )?),
        None => psc
            .seccomp_profile
            .as_ref()
            .map(|p| {
                profile(
                    &pfield("seccompProfile"),
                    &p.type_,
                    p.localhost_profile.as_deref(),
                )
            })
            .transpose()?,
    };
    let apparmor = match &csc.app_armor_profile {
        Some(p) => Some(profile(
            &cfield("appArmorProfile"),
            &p.type_,
            p.localhost_profile.as_deref(),
        )?),
        None => psc
            .app_armor_profile
            .as_ref()
            .map(|p| {
                profile(
                    &pfield("appArmorProfile"),
                    &p.type_,
                    p.localhost_profile.as_deref(),
                )
            })
            .transpose()?,
    };
    Ok(ContainerSecurity {
        run_as_user,
        run_as_group,
        run_as_non_root: csc.run_as_non_root.or(psc.run_as_non_root).unwrap_or(false),
        pod_groups,
        groups_policy,
        fs_group,
        privileged,
        no_new_privileges: !privileged && csc.allow_privilege_escalation == Some(false),
        capabilities,
        read_only_root: csc.read_only_root_filesystem.unwrap_or(false),
        proc_unmasked,
        seccomp,
        apparmor,
    })
}

fn id(field: &str, v: i64) -> Result<u32, SecurityError> {
    u32::try_from(v)
        .ok()
        .filter(|v| *v != u32::MAX)
        .ok_or_else(|| SecurityError::BadId {
            field: field.to_string(),
            value: v,
        })
}

fn dedup_keep_order(v: &mut Vec<u32>) {
    let mut seen = BTreeSet::new();
    v.retain(|g| seen.insert(*g));
}

fn profile(
    field: &str,
    type_: &str,
    localhost: Option<&str>,
) -> Result<ProfileChoice, SecurityError> {
    match type_ {
        "RuntimeDefault" => Ok(ProfileChoice::RuntimeDefault),
        "Unconfined" => Ok(ProfileChoice::Unconfined),
        "Localhost" => match localhost.filter(|p| !p.is_empty()) {
            Some(p) => Ok(ProfileChoice::Localhost(p.to_string())),
            None => Err(SecurityError::MissingLocalhostProfile {
                field: field.to_string(),
            }),
        },
        other => Err(SecurityError::BadProfileType {
            field: field.to_string(),
            value: other.to_string(),
        }),
    }
}

/// `NET_ADMIN`, `net_admin` and `CAP_NET_ADMIN` all name CAP_NET_ADMIN (containerd
/// accepts each); `ALL` is kept as is.
pub fn normalize_capability(name: &str) -> String {
    let upper = name.trim().to_ascii_uppercase();
    if upper == "ALL" || upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    }
}

/// containerd's order: privileged → all; else the default set, then `add: [ALL]`
/// (all), `drop: [ALL]` (none), then each named add, then each named drop; so
/// `drop: [ALL], add: [NET_BIND_SERVICE]` leaves exactly NET_BIND_SERVICE.
fn capability_set(
    csc: &SecurityContext,
    privileged: bool,
    field: &str,
) -> Result<Vec<String>, SecurityError> {
    let known = |n: &str| ALL_CAPABILITIES.contains(&n);
    if privileged {
        return Ok(ALL_CAPABILITIES.iter().map(|s| s.to_string()).collect());
    }
    let caps = csc.capabilities.clone().unwrap_or_default();
    let list = |l: Option<Vec<String>>, what: &str| -> Result<Vec<String>, SecurityError> {
        l.unwrap_or_default()
            .iter()
            .map(|n| {
                let n2 = normalize_capability(n);
                if n2 == "ALL" || known(&n2) {
                    Ok(n2)
                } else {
                    Err(SecurityError::UnknownCapability {
                        field: format!("{field}.{what}"),
                        name: n.clone(),
                    })
                }
            })
            .collect()
    };
    let add = list(caps.add, "add")?;
    let drop = list(caps.drop, "drop")?;
    let mut set: BTreeSet<&str> = DEFAULT_CAPABILITIES.into_iter().collect();
    if add.iter().any(|a| a == "ALL") {
        set.extend(ALL_CAPABILITIES);
    }
    if drop.iter().any(|d| d == "ALL") {
        set.clear();
    }
    for a in add.iter().filter(|a| *a != "ALL") {
        if let Some(k) = ALL_CAPABILITIES.iter().find(|k| **k == a.as_str()) {
            set.insert(k);
        }
    }
    for d in drop.iter().filter(|d| *d != "ALL") {
        set.remove(d.as_str());
    }
    // Number order, so the spec is stable.
    Ok(ALL_CAPABILITIES
        .iter()
        .filter(|c| set.contains(*c))
        .map(|c| c.to_string())
        .collect())
}

/// The kubelet's `format.Pod`: `name_namespace(uid)`.
pub fn pod_ref(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// The user the image would run as, for the runAsNonRoot check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageUserId {
    /// A uid: numeric in the image, or a name podhost resolved in the image's
    /// /etc/passwd (the kubelet cannot, and refuses every named user).
    Uid(u32),
    /// A name that is not in the image's /etc/passwd.
    Unresolved(String),
}

/// The kubelet's `verifyRunAsNonRoot`, with its messages: refuses a container that
/// must not run as root but would. Unlike the kubelet, a named image user is checked
/// by its uid in the image's /etc/passwd instead of being refused outright.
pub fn verify_run_as_non_root(
    sec: &ContainerSecurity,
    image_user: &ImageUserId,
    pod: &str,
    container: &str,
) -> Result<(), SecurityError> {
    if !sec.run_as_non_root {
        return Ok(());
    }
    let (pod, container) = (pod.to_string(), container.to_string());
    if let Some(uid) = sec.run_as_user {
        if uid == 0 {
            return Err(SecurityError::RunAsUserRoot { pod, container });
        }
        return Ok(());
    }
    match image_user {
        ImageUserId::Uid(0) => Err(SecurityError::ImageRunsAsRoot { pod, container }),
        ImageUserId::Uid(_) => Ok(()),
        ImageUserId::Unresolved(name) => Err(SecurityError::UnverifiableImageUser {
            user: name.clone(),
            pod,
            container,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn sec(yaml: &str) -> ContainerSecurity {
        let p = pod(yaml);
        let c = p.spec.as_ref().unwrap().containers[0].clone();
        container_security(&p, &c, 0).unwrap()
    }

    const BASE: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n";

    #[test]
    fn defaults_are_containerds() {
        let s = sec(&format!("{BASE}  containers: [{{name: c, image: i}}]"));
        assert_eq!(s.capabilities.len(), 14);
        assert!(s.capabilities.contains(&"CAP_MKNOD".to_string()));
        assert!(!s.no_new_privileges && !s.privileged && !s.read_only_root);
        assert_eq!((s.run_as_user, s.seccomp, s.apparmor), (None, None, None));
    }

    #[test]
    fn the_container_wins_over_the_pod() {
        let s = sec(&format!(
            "{BASE}  securityContext: {{runAsUser: 1000, runAsGroup: 2000, runAsNonRoot: true, \
             supplementalGroups: [5, 6, 5], fsGroup: 7, seccompProfile: {{type: Unconfined}}}}\n  \
             containers:\n  - name: c\n    image: i\n    securityContext: {{runAsUser: 1001, \
             seccompProfile: {{type: Localhost, localhostProfile: p/x.json}}}}\n"
        ));
        assert_eq!(s.run_as_user, Some(1001));
        assert_eq!(s.run_as_group, Some(2000));
        assert!(s.run_as_non_root);
        assert_eq!(s.pod_groups, vec![5, 6, 7]);
        assert_eq!(s.fs_group, Some(7));
        assert_eq!(s.seccomp, Some(ProfileChoice::Localhost("p/x.json".into())));
    }

    #[test]
    fn capabilities_follow_containerd() {
        let caps = |sc: &str| {
            sec(&format!(
                "{BASE}  containers:\n  - name: c\n    image: i\n    securityContext: {sc}\n"
            ))
            .capabilities
        };
        assert!(caps("{capabilities: {drop: [ALL]}}").is_empty());
        assert_eq!(
            caps("{capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}}"),
            vec!["CAP_NET_BIND_SERVICE"]
        );
        let c = caps("{capabilities: {add: [sys_admin, CAP_NET_ADMIN], drop: [MKNOD]}}");
        assert!(c.contains(&"CAP_SYS_ADMIN".into()) && c.contains(&"CAP_NET_ADMIN".into()));
        assert!(!c.contains(&"CAP_MKNOD".into()));
        assert_eq!(
            caps("{capabilities: {add: [ALL], drop: [CHOWN]}}").len(),
            40
        );
        assert_eq!(
            caps("{privileged: true, capabilities: {drop: [ALL]}}").len(),
            41
        );
        let p = pod(&format!(
            "{BASE}  containers:\n  - name: c\n    image: i\n    securityContext: {{capabilities: {{add: [NOT_A_CAP]}}}}\n"
        ));
        let c = p.spec.as_ref().unwrap().containers[0].clone();
        let err = container_security(&p, &c, 0).unwrap_err();
        assert!(
            err.to_string()
                .contains("spec.containers[0].securityContext.capabilities.add"),
            "{err}"
        );
    }

    #[test]
    fn no_new_privs_only_when_escalation_is_refused() {
        let nnp = |sc: &str| {
            sec(&format!(
                "{BASE}  containers:\n  - name: c\n    image: i\n    securityContext: {sc}\n"
            ))
            .no_new_privileges
        };
        assert!(nnp("{allowPrivilegeEscalation: false}"));
        assert!(!nnp("{allowPrivilegeEscalation: true}"));
        assert!(!nnp("{privileged: true}"));
    }

    #[test]
    fn bad_values_name_the_field() {
        for (sc, field) in [
            (
                "{runAsUser: -1}",
                "spec.containers[0].securityContext.runAsUser",
            ),
            (
                "{procMount: Weird}",
                "spec.containers[0].securityContext.procMount",
            ),
            (
                "{seccompProfile: {type: Localhost}}",
                "spec.containers[0].securityContext.seccompProfile",
            ),
            (
                "{appArmorProfile: {type: Bogus}}",
                "spec.containers[0].securityContext.appArmorProfile",
            ),
            (
                "{privileged: true, allowPrivilegeEscalation: false}",
                "spec.containers[0].securityContext.allowPrivilegeEscalation",
            ),
        ] {
            let p = pod(&format!(
                "{BASE}  containers:\n  - name: c\n    image: i\n    securityContext: {sc}\n"
            ));
            let c = p.spec.as_ref().unwrap().containers[0].clone();
            let err = container_security(&p, &c, 0).unwrap_err().to_string();
            assert!(err.contains(field), "{sc}: {err}");
        }
    }

    #[test]
    fn run_as_non_root_messages_are_the_kubelets() {
        let mut s = sec(&format!("{BASE}  containers: [{{name: c, image: i}}]"));
        let v = |s: &ContainerSecurity, u: ImageUserId| {
            verify_run_as_non_root(s, &u, "p_default(u1)", "c").map_err(|e| e.to_string())
        };
        assert!(v(&s, ImageUserId::Uid(0)).is_ok(), "not asked: not checked");
        s.run_as_non_root = true;
        assert_eq!(
            v(&s, ImageUserId::Uid(0)).unwrap_err(),
            "container has runAsNonRoot and image will run as root (pod: \"p_default(u1)\", container: c)"
        );
        assert!(v(&s, ImageUserId::Uid(1000)).is_ok());
        assert_eq!(
            v(&s, ImageUserId::Unresolved("app".into())).unwrap_err(),
            "container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root (pod: \"p_default(u1)\", container: c)"
        );
        s.run_as_user = Some(0);
        assert_eq!(
            v(&s, ImageUserId::Uid(1000)).unwrap_err(),
            "container's runAsUser breaks non-root policy (pod: \"p_default(u1)\", container: c)"
        );
        s.run_as_user = Some(5);
        assert!(v(&s, ImageUserId::Uid(0)).is_ok(), "runAsUser decides");
    }
}
