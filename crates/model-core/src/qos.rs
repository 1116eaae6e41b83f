//! QoS class and the oom_score_adj policy (kubelet-semantics §6).

/// `status.qosClass`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Guaranteed => "Guaranteed",
            Self::Burstable => "Burstable",
            Self::BestEffort => "BestEffort",
        }
    }
}

/// The CPU and memory a container asks for, with requests defaulted to limits as the
/// API server does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContainerResources {
    pub cpu_request_milli: Option<i64>,
    pub cpu_limit_milli: Option<i64>,
    pub memory_request: Option<i64>,
    pub memory_limit: Option<i64>,
}

/// The kubelet's `GetPodQOS`: no requests or limits → BestEffort; every container with
/// equal non-zero cpu and memory requests and limits → Guaranteed; otherwise Burstable.
pub fn qos_class(containers: &[ContainerResources]) -> QosClass {
    let any = containers.iter().any(|c| {
        c.cpu_request_milli.unwrap_or(0) > 0
            || c.cpu_limit_milli.unwrap_or(0) > 0
            || c.memory_request.unwrap_or(0) > 0
            || c.memory_limit.unwrap_or(0) > 0
    });
    if !any {
        return QosClass::BestEffort;
    }
    let guaranteed = containers.iter().all(|c| {
        matches!((c.cpu_request_milli, c.cpu_limit_milli), (Some(r), Some(l)) if r == l && l > 0)
            && matches!((c.memory_request, c.memory_limit), (Some(r), Some(l)) if r == l && l > 0)
    });
    if guaranteed {
        QosClass::Guaranteed
    } else {
        QosClass::Burstable
    }
}

pub const GUARANTEED_OOM_SCORE_ADJ: i32 = -997;
pub const BEST_EFFORT_OOM_SCORE_ADJ: i32 = 1000;
/// The daemon's own score, as the kubelet's.
pub const DAEMON_OOM_SCORE_ADJ: i32 = -999;
/// Every shim's score (as containerd's sandbox).
pub const SHIM_OOM_SCORE_ADJ: i32 = -998;

/// The kubelet's `GetContainerOOMScoreAdjust`.
pub fn container_oom_score_adj(
    qos: QosClass,
    node_critical: bool,
    memory_request: Option<i64>,
    memory_capacity: i64,
) -> i32 {
    if node_critical || qos == QosClass::Guaranteed {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    if qos == QosClass::BestEffort {
        return BEST_EFFORT_OOM_SCORE_ADJ;
    }
    let request = i128::from(memory_request.unwrap_or(0).max(0));
    let capacity = i128::from(memory_capacity.max(1));
    let adj = 1000 - (1000 * request) / capacity;
    super::convert::clamp_i32(adj.clamp(
        i128::from(1000 + GUARANTEED_OOM_SCORE_ADJ),
        i128::from(BEST_EFFORT_OOM_SCORE_ADJ - 1),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(
        cr: Option<i64>,
        cl: Option<i64>,
        mr: Option<i64>,
        ml: Option<i64>,
    ) -> ContainerResources {
        ContainerResources {
            cpu_request_milli: cr,
            cpu_limit_milli: cl,
            memory_request: mr,
            memory_limit: ml,
        }
    }

    #[test]
    fn classes() {
        assert_eq!(
            qos_class(&[res(None, None, None, None)]),
            QosClass::BestEffort
        );
        let g = res(Some(500), Some(500), Some(64), Some(64));
        assert_eq!(qos_class(&[g, g]), QosClass::Guaranteed);
        assert_eq!(
            qos_class(&[g, res(None, None, None, None)]),
            QosClass::Burstable
        );
        assert_eq!(
            qos_class(&[res(Some(100), None, None, None)]),
            QosClass::Burstable
        );
        assert_eq!(
            qos_class(&[res(Some(100), Some(200), Some(1), Some(1))]),
            QosClass::Burstable
        );
    }

    #[test]
    fn oom_score_adj_policy() {
        let cap = 1000 << 20;
        assert_eq!(
            container_oom_score_adj(QosClass::Guaranteed, false, None, cap),
            -997
        );
        assert_eq!(
            container_oom_score_adj(QosClass::Burstable, true, None, cap),
            -997
        );
        assert_eq!(
            container_oom_score_adj(QosClass::BestEffort, false, None, cap),
            1000
        );
        assert_eq!(
            container_oom_score_adj(QosClass::Burstable, false, Some(250 << 20), cap),
            750
        );
        assert_eq!(
            container_oom_score_adj(QosClass::Burstable, false, Some(cap), cap),
            3
        );
        assert_eq!(
            container_oom_score_adj(QosClass::Burstable, false, Some(0), cap),
            999
        );
        assert_eq!(
            container_oom_score_adj(QosClass::Burstable, false, Some(1), cap),
            999
        );
    }
}
