//! Whether an exited container starts again (kubelet `ShouldContainerBeRestarted`).

/// `spec.restartPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Always,
    OnFailure,
    Never,
}

impl RestartPolicy {
    /// Parses the spec value; absent means the API default `Always`.
    pub fn from_spec(value: Option<&str>) -> Option<Self> {
        match value {
            None | Some("Always") => Some(Self::Always),
            Some("OnFailure") => Some(Self::OnFailure),
            Some("Never") => Some(Self::Never),
            Some(_) => None,
        }
    }

    /// Whether a container that exited with `exit_code` is started again.
    pub fn should_restart(self, exit_code: i32) -> bool {
        match self {
            Self::Always => true,
            Self::OnFailure => exit_code != 0,
            Self::Never => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies() {
        assert!(RestartPolicy::Always.should_restart(0));
        assert!(!RestartPolicy::OnFailure.should_restart(0));
        assert!(RestartPolicy::OnFailure.should_restart(3));
        assert!(!RestartPolicy::Never.should_restart(137));
        assert_eq!(RestartPolicy::from_spec(None), Some(RestartPolicy::Always));
        assert_eq!(RestartPolicy::from_spec(Some("Sometimes")), None);
    }
}
