//! The image pull policy (`imagePullPolicy`), decided as the kubelet's image manager
//! (`shouldPullImage`): what to do about a container's image before it starts.

/// What the worker does about the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullDecision {
    /// Pull it (Always; IfNotPresent when it is missing).
    Pull,
    /// Use the stored image ("already present on machine").
    UseStored,
    /// It is missing and may not be pulled: `ErrImageNeverPull` with this policy.
    NeverPullMissing { policy: &'static str },
}

/// `policy` is the spec's `imagePullPolicy` (absent: IfNotPresent, the API default for a
/// tagged image); `local_only`: a `localhost/` image (podman's convention: never pulled,
/// whatever its policy says); `present`: the store holds the image.
pub fn pull_decision(policy: Option<&str>, local_only: bool, present: bool) -> PullDecision {
    let policy = match policy {
        _ if local_only => "Never",
        Some("Always") => "Always",
        Some("Never") => "Never",
        _ => "IfNotPresent",
    };
    match (policy, present) {
        ("Always", _) => PullDecision::Pull,
        (_, true) => PullDecision::UseStored,
        ("Never", false) => PullDecision::NeverPullMissing { policy: "Never" },
        _ => PullDecision::Pull,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_pull_policy_table() {
        use PullDecision::*;
        let never = NeverPullMissing { policy: "Never" };
        // (policy, local-only, present) -> decision
        let table: [(Option<&str>, bool, bool, PullDecision); 12] = [
            (Some("Always"), false, true, Pull),
            (Some("Always"), false, false, Pull),
            (Some("IfNotPresent"), false, true, UseStored),
            (Some("IfNotPresent"), false, false, Pull),
            (Some("Never"), false, true, UseStored),
            (Some("Never"), false, false, never),
            (None, false, true, UseStored),
            (None, false, false, Pull),
            // A localhost/ image is never pulled, even under Always.
            (Some("Always"), true, true, UseStored),
            (Some("Always"), true, false, never),
            (None, true, false, never),
            // An unknown policy (validation refuses it first) behaves as IfNotPresent.
            (Some("Sometimes"), false, false, Pull),
        ];
        for (policy, local, present, want) in table {
            assert_eq!(
                pull_decision(policy, local, present),
                want,
                "policy {policy:?}, local-only {local}, present {present}"
            );
        }
    }
}
