//! What podhost does with each Pod field: [`FIELDS`], a table of path patterns, each
//! honoured, ignored (and why) or rejected (and why). A field a manifest sets that the
//! table does not list is ignored as "not honoured yet" — reported, never dropped
//! silently (the daemon's `FieldNotHonoured` events, `podhost validate`). When a
//! feature lands, adding its path here as [`FieldStatus::Honoured`] is all it takes;
//! the "Fields honoured" section of docs/static-pods.md is checked against the
//! honoured entries.
//!
//! Syntax: JSON paths with `.` between object keys and `[*]` for every array element.
//! An entry decides its whole subtree (`metadata.labels` honours every label).

/// What podhost does with a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldStatus {
    /// podhost acts on it as the kubelet does.
    Honoured,
    /// Accepted, but it changes nothing here; the reason says why. The daemon warns.
    Ignored(&'static str),
    /// Ignored by design, as the kubelet does too (`ports` without pod networking, DNS
    /// settings without cluster DNS): reported as ignored by `podhost validate`, with
    /// no warning from the daemon, since nothing the user expects is lost.
    Informational(&'static str),
    /// A pod that sets it is refused; the reason says why and what to do.
    Rejected(&'static str),
    /// Honoured where the host allows, but not on this host (its cgroups cannot apply
    /// it, e.g. cgroup v1); the reason says what is missing. Never in [`FIELDS`]: set
    /// by `podhost validate`'s host pass ([`super::host_enforcement`]).
    NotEnforced(&'static str),
}

impl FieldStatus {
    /// `honoured`, `ignored`, `rejected` or `not-enforced` (the `-o json` status).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Honoured => "honoured",
            Self::Ignored(_) | Self::Informational(_) => "ignored",
            Self::Rejected(_) => "rejected",
            Self::NotEnforced(_) => "not-enforced",
        }
    }

    /// Why it is ignored or rejected ("" when honoured).
    pub fn reason(self) -> &'static str {
        match self {
            Self::Honoured => "",
            Self::Ignored(why)
            | Self::Informational(why)
            | Self::Rejected(why)
            | Self::NotEnforced(why) => why,
        }
    }
}

/// The reason of a field the table does not list.
pub const NOT_YET: &str = "not honoured yet";

use FieldStatus::{Honoured, Ignored, Informational, Rejected};

/// The table (see the module documentation).
pub const FIELDS: &[(&str, FieldStatus)] = &[
    ("apiVersion", Honoured),
    ("kind", Honoured),
    // metadata
    ("metadata.name", Honoured),
    ("metadata.namespace", Honoured),
    ("metadata.labels", Honoured),
    ("metadata.annotations", Honoured),
    // Accepted, but replaced by the content hash (see `identity`, which warns when it
    // differs) so edits are seen.
    ("metadata.uid", Honoured),
    (
        "metadata.creationTimestamp",
        Ignored("set by podhost when it reads the manifest"),
    ),
    // spec.containers
    ("spec.containers[*].name", Honoured),
    ("spec.containers[*].image", Honoured),
    ("spec.containers[*].imagePullPolicy", Honoured),
    ("spec.containers[*].command", Honoured),
    ("spec.containers[*].args", Honoured),
    ("spec.containers[*].env[*].name", Honoured),
    ("spec.containers[*].env[*].value", Honoured),
    // From --config-dir objects and the downward API.
    ("spec.containers[*].env[*].valueFrom", Honoured),
    ("spec.containers[*].envFrom", Honoured),
    ("spec.containers[*].workingDir", Honoured),
    ("spec.containers[*].lifecycle.preStop.exec", Honoured),
    ("spec.containers[*].lifecycle.preStop.sleep", Honoured),
    ("spec.containers[*].lifecycle.preStop.httpGet", Honoured),
    ("spec.containers[*].lifecycle.postStart.exec", Honoured),
    ("spec.containers[*].lifecycle.postStart.httpGet", Honoured),
    ("spec.containers[*].lifecycle.postStart.sleep", Honoured),
    ("spec.containers[*].startupProbe", Honoured),
    ("spec.containers[*].livenessProbe", Honoured),
    ("spec.containers[*].readinessProbe", Honoured),
    ("spec.containers[*].volumeMounts[*].name", Honoured),
    ("spec.containers[*].volumeMounts[*].mountPath", Honoured),
    ("spec.containers[*].volumeMounts[*].readOnly", Honoured),
    ("spec.containers[*].volumeMounts[*].subPath", Honoured),
    ("spec.containers[*].volumeMounts[*].subPathExpr", Honoured),
    // Set by a createContainer hook (libcontainer drops bind propagation flags).
    (
        "spec.containers[*].volumeMounts[*].mountPropagation",
        Honoured,
    ),
    ("spec.containers[*].terminationMessagePath", Honoured),
    ("spec.containers[*].terminationMessagePolicy", Honoured),
    // CPU and memory are enforced on cgroup v2, and on v1 per container (`podhost
    // validate`'s host pass and the daemon's events say what a host does not enforce).
    ("spec.containers[*].resources.requests.cpu", Honoured),
    ("spec.containers[*].resources.requests.memory", Honoured),
    ("spec.containers[*].resources.limits.cpu", Honoured),
    ("spec.containers[*].resources.limits.memory", Honoured),
    ("spec.containers[*].securityContext.runAsUser", Honoured),
    ("spec.containers[*].securityContext.runAsGroup", Honoured),
    ("spec.containers[*].securityContext.runAsNonRoot", Honoured),
    ("spec.containers[*].securityContext.privileged", Honoured),
    (
        "spec.containers[*].securityContext.allowPrivilegeEscalation",
        Honoured,
    ),
    ("spec.containers[*].securityContext.capabilities", Honoured),
    (
        "spec.containers[*].securityContext.readOnlyRootFilesystem",
        Honoured,
    ),
    ("spec.containers[*].securityContext.procMount", Honoured),
    (
        "spec.containers[*].securityContext.appArmorProfile",
        Honoured,
    ),
    (
        "spec.containers[*].securityContext.seccompProfile",
        Honoured,
    ),
    // hostPort/hostIP/protocol published by the pod network (the bridge's DNAT or CNI's
    // portMappings) and admitted as the kubelet's NodePorts predicate; named ports are
    // what probes and hooks refer to.
    ("spec.containers[*].ports", Honoured),
    (
        "spec.containers[*].stdin",
        Ignored("podhost attaches no terminal; the container's stdin is /dev/null"),
    ),
    (
        "spec.containers[*].tty",
        Ignored("podhost attaches no terminal; logs are written in the CRI format"),
    ),
    // spec.initContainers: every spec.containers entry applies to them too (see
    // `decide`); restartPolicy Always makes a sidecar.
    ("spec.initContainers[*].restartPolicy", Honoured),
    // spec.volumes
    ("spec.volumes[*].name", Honoured),
    ("spec.volumes[*].emptyDir", Honoured),
    ("spec.volumes[*].hostPath", Honoured),
    ("spec.volumes[*].configMap", Honoured),
    ("spec.volumes[*].secret", Honoured),
    ("spec.volumes[*].downwardAPI", Honoured),
    ("spec.volumes[*].projected", Honoured),
    // spec
    // Their logins are tried before --image-credentials: a static pod's Secrets from
    // --config-dir, an API pod's from the API server (worker::pull_secrets).
    ("spec.imagePullSecrets", Honoured),
    ("spec.activeDeadlineSeconds", Honoured),
    ("spec.restartPolicy", Honoured),
    ("spec.terminationGracePeriodSeconds", Honoured),
    ("spec.hostNetwork", Honoured),
    ("spec.hostPID", Honoured),
    ("spec.hostIPC", Honoured),
    // One pid namespace for the pod, held by `podhost pause` as its PID 1.
    ("spec.shareProcessNamespace", Honoured),
    // false: a user namespace of the pod's own (runtime/userns).
    ("spec.hostUsers", Honoured),
    // securityContext, pod level (the container's wins where both have a field).
    ("spec.securityContext.runAsUser", Honoured),
    ("spec.securityContext.runAsGroup", Honoured),
    ("spec.securityContext.runAsNonRoot", Honoured),
    ("spec.securityContext.supplementalGroups", Honoured),
    ("spec.securityContext.supplementalGroupsPolicy", Honoured),
    // Added to the containers' groups and applied to emptyDir and content volumes.
    ("spec.securityContext.fsGroup", Honoured),
    ("spec.securityContext.fsGroupChangePolicy", Honoured),
    ("spec.securityContext.sysctls", Honoured),
    ("spec.securityContext.appArmorProfile", Honoured),
    ("spec.securityContext.seccompProfile", Honoured),
    ("spec.nodeName", Honoured),
    ("spec.tolerations", Honoured),
    // /etc/resolv.conf, /etc/hosts and the hostname, as the kubelet writes them.
    ("spec.dnsPolicy", Honoured),
    ("spec.dnsConfig", Honoured),
    ("spec.hostAliases", Honoured),
    ("spec.hostname", Honoured),
    ("spec.subdomain", Honoured),
    ("spec.setHostnameAsFQDN", Honoured),
    ("spec.schedulerName", Honoured),
    ("spec.priority", Honoured),
    // system-node-critical sets the oom_score_adj of a Guaranteed pod.
    ("spec.priorityClassName", Honoured),
    (
        "spec.preemptionPolicy",
        Informational("preemption is the scheduler's; the kubelet does not use it"),
    ),
    (
        "spec.enableServiceLinks",
        Informational(
            "service environment variables come from the API server's Services: honoured in cluster mode, none standalone",
        ),
    ),
    (
        "spec.nodeSelector",
        Ignored("a static pod runs on the node whose manifest directory holds it"),
    ),
    (
        "spec.affinity",
        Ignored("a static pod runs on the node whose manifest directory holds it"),
    ),
    (
        "spec.readinessGates",
        Ignored(
            "a readiness gate's condition is written through the API server: honoured for pods of the API server, not for static pods",
        ),
    ),
    (
        "spec.containers[*].resizePolicy",
        Ignored(
            "a static pod is never resized in place (a changed manifest replaces the pod): honoured for pods of the API server (pods/resize), not for static pods",
        ),
    ),
    (
        "spec.ephemeralContainers",
        Rejected(
            "ephemeral containers are added to a running pod (podhost debug), not written in a manifest",
        ),
    ),
    // status is what podhost reports, never read from a manifest.
    (
        "status",
        Ignored("status is written by podhost, not read from the manifest"),
    ),
];

/// Where the table differs for pods from the API server (cluster mode): fields the
/// API server fills in on every pod, and placement fields the node checks at admission
/// (`model::admission`) where a static pod's are meaningless. Looked up before
/// [`FIELDS`].
pub const API_FIELDS: &[(&str, FieldStatus)] = &[
    // The API server's ServiceAccount admission turned these into the projected token
    // volume, which podhost fills through TokenRequest for this service account.
    ("spec.serviceAccountName", Honoured),
    ("spec.serviceAccount", Honoured),
    ("spec.automountServiceAccountToken", Honoured),
    // The Services watch gives the pod its namespace's service variables.
    ("spec.enableServiceLinks", Honoured),
    // Their conditions are read from the pod's status in the API server.
    ("spec.readinessGates", Honoured),
    // In-place resize (pods/resize): NotRequired in place, RestartContainer by a restart.
    ("spec.containers[*].resizePolicy", Honoured),
    // Checked at admission (NodeAffinity), as the kubelet does.
    ("spec.nodeSelector", Honoured),
    (
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        Honoured,
    ),
    (
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution",
        Informational("preferred node affinity is the scheduler's; the kubelet does not check it"),
    ),
    (
        "spec.affinity.podAffinity",
        Informational("pod affinity is the scheduler's; the kubelet does not check it"),
    ),
    (
        "spec.affinity.podAntiAffinity",
        Informational("pod anti-affinity is the scheduler's; the kubelet does not check it"),
    ),
    (
        "spec.topologySpreadConstraints",
        Informational("topology spread is the scheduler's; the kubelet does not check it"),
    ),
];

/// Which table decides: a manifest's ([`FIELDS`]) or an API pod's ([`API_FIELDS`]
/// first, then [`FIELDS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOrigin {
    /// A static pod's manifest (directory or `--manifest-url`).
    Manifest,
    /// A pod bound to this node by the API server.
    Api,
}

/// How a pattern path (with `[*]` for array indices) relates to [`FIELDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// An entry decides the path and its whole subtree.
    Whole(FieldStatus),
    /// Entries below the path decide: look inside.
    Partly,
    /// Nothing at or below the path is listed: not honoured yet.
    Unlisted,
}

/// Classifies a pattern path such as `spec.containers[*].env[*]`. An init container's
/// field is decided as the same field of a container, unless the table lists it for
/// init containers itself.
#[cfg(test)]
pub(crate) fn decide(pattern: &str) -> Decision {
    decide_for(pattern, FieldOrigin::Manifest)
}

/// [`decide`] for a pod of `origin`.
pub(crate) fn decide_for(pattern: &str, origin: FieldOrigin) -> Decision {
    let listed = |p: &str| match origin {
        FieldOrigin::Api => match decide_in(API_FIELDS, p) {
            Decision::Unlisted => decide_in(FIELDS, p),
            decided => decided,
        },
        FieldOrigin::Manifest => decide_in(FIELDS, p),
    };
    let own = listed(pattern);
    let Some(rest) = pattern.strip_prefix("spec.initContainers") else {
        return own;
    };
    match (own, listed(&format!("spec.containers{rest}"))) {
        (Decision::Whole(status), _) => Decision::Whole(status),
        (_, Decision::Whole(status)) => Decision::Whole(status),
        (Decision::Unlisted, Decision::Unlisted) => Decision::Unlisted,
        _ => Decision::Partly,
    }
}

fn decide_in(table: &[(&str, FieldStatus)], pattern: &str) -> Decision {
    let mut partly = false;
    for &(entry, status) in table {
        if entry == pattern {
            return Decision::Whole(status);
        }
        if let Some(rest) = entry.strip_prefix(pattern)
            && (rest.starts_with('.') || rest.starts_with('['))
        {
            partly = true;
        }
    }
    if partly {
        Decision::Partly
    } else {
        Decision::Unlisted
    }
}

/// The honoured entries' paths.
pub fn honoured_fields() -> impl Iterator<Item = &'static str> {
    FIELDS
        .iter()
        .filter(|(_, s)| *s == Honoured)
        .map(|(path, _)| *path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        use Decision::*;
        assert_eq!(decide("spec"), Partly);
        assert_eq!(decide("spec.containers"), Partly);
        assert_eq!(decide("spec.containers[*]"), Partly);
        assert_eq!(decide("spec.containers[*].image"), Whole(Honoured));
        assert_eq!(decide("spec.containers[*].imagePull"), Unlisted);
        assert_eq!(decide("spec.containers[*].env[*]"), Partly);
        assert_eq!(
            decide("spec.containers[*].env[*].valueFrom"),
            Whole(Honoured)
        );
        assert_eq!(decide("spec.containers[*].lifecycle"), Partly);
        assert_eq!(
            decide("spec.containers[*].lifecycle.preStop.tcpSocket"),
            Unlisted
        );
        assert_eq!(decide("spec.volumes"), Partly);
        assert_eq!(decide("spec.volumes[*].nfs"), Unlisted);
        assert_eq!(decide("spec.initContainers"), Partly);
        assert_eq!(decide("spec.initContainers[*].image"), Whole(Honoured));
        assert_eq!(
            decide("spec.initContainers[*].restartPolicy"),
            Whole(Honoured)
        );
        assert_eq!(decide("spec.initContainers[*].imagePull"), Unlisted);
        assert_eq!(decide("metadata.labels"), Whole(Honoured));
        assert_eq!(decide("metadata.generateName"), Unlisted);
        assert_eq!(decide("spec.containers[*].ports"), Whole(Honoured));
        assert_eq!(decide("spec.imagePullSecrets"), Whole(Honoured));
        assert_eq!(
            decide_for("spec.imagePullSecrets", FieldOrigin::Api),
            Whole(Honoured)
        );
        assert!(matches!(
            decide("spec.enableServiceLinks"),
            Whole(Informational(_))
        ));
        assert!(matches!(decide("spec.nodeSelector"), Whole(Ignored(_))));
        assert!(matches!(
            decide("spec.ephemeralContainers"),
            Whole(Rejected(_))
        ));
    }

    #[test]
    fn entries_are_well_formed_and_unique() {
        for (e, status) in FIELDS {
            assert!(
                !e.is_empty() && !e.starts_with('.') && !e.ends_with('.'),
                "{e}"
            );
            assert!(!e.contains("[]") && !e.contains(".."), "{e}");
            if let Ignored(why) | Informational(why) | Rejected(why) = status {
                assert!(!why.is_empty(), "{e}: a reason is required");
            }
            assert!(
                !matches!(status, FieldStatus::NotEnforced(_)),
                "{e}: NotEnforced depends on the host, not on the table"
            );
        }
        let mut sorted: Vec<_> = FIELDS.iter().map(|(p, _)| *p).collect();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), FIELDS.len(), "duplicate entry");
        // An entry below another is never reached (the walk stops at the upper one).
        for (e, _) in FIELDS {
            for (other, _) in FIELDS {
                let below = e
                    .strip_prefix(other)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['));
                assert!(!below, "{e} is shadowed by {other}");
            }
        }
    }

    /// The "Fields honoured" section of docs/static-pods.md names every honoured
    /// field (by its last path element), so the documentation cannot fall behind the
    /// table.
    #[test]
    fn readme_lists_every_honoured_field() {
        // The workspace root is two levels above this crate (crates/source).
        let readme = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/static-pods.md"),
        )
        .unwrap();
        let start = readme
            .find("## Fields honoured")
            .expect("the docs' section");
        let section = &readme[start..];
        let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
        let missing: Vec<&str> = honoured_fields()
            .filter(|path| {
                let leaf = path.rsplit(['.', ']']).next().unwrap_or(path);
                !section.contains(leaf)
            })
            .collect();
        assert!(
            missing.is_empty(),
            "docs/static-pods.md \"Fields honoured\" does not name: {missing:?}"
        );
    }
}
