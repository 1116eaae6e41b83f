//! Admission of a pod's sysctls as every source meets it (a cluster-mode pod comes
//! here without the static manifest's validation).

use k8s_openapi::api::core::v1::{Pod, PodSecurityContext, PodSpec, Sysctl};

use super::*;

/// A node allowing `net.*` beyond the safe set.
fn node() -> NodeSecurity {
    let mut node = NodeSecurity::new(std::path::Path::new("/nonexistent/podhost-test"));
    node.sysctls = SysctlAllowlist::new(&["net.*".into()]).unwrap();
    node
}

fn pod(sysctls: &[(&str, &str)]) -> PodInfo {
    let mut pod = Pod::default();
    pod.metadata.name = Some("evil".into());
    pod.metadata.namespace = Some("team".into());
    pod.spec = Some(PodSpec {
        security_context: Some(PodSecurityContext {
            sysctls: Some(
                sysctls
                    .iter()
                    .map(|(name, value)| Sysctl {
                        name: name.to_string(),
                        value: value.to_string(),
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    });
    PodInfo::from_pod(pod)
}

#[test]
fn allowed_sysctls_are_admitted() {
    let admitted = admit(
        &node(),
        &pod(&[
            ("net.core.somaxconn", "1024"),
            ("kernel.shm_rmid_forced", "1"),
        ]),
    );
    assert_eq!(admitted, Ok(()));
}

#[test]
fn a_name_climbing_out_of_its_tree_is_refused_with_pod_and_field() {
    let rejection = admit(
        &node(),
        &pod(&[
            ("net.core.somaxconn", "1024"),
            ("net.ipv4/../../kernel.core_pattern", "core.x"),
        ]),
    )
    .unwrap_err();
    assert_eq!(rejection.reason, "SysctlForbidden");
    assert_eq!(
        rejection.message,
        format!(
            "forbidden sysctl in pod team/evil: spec.securityContext.sysctls[1].name: invalid value \"net.ipv4/../../kernel.core_pattern\": {}",
            podhost_model::sysctl::NAME_RULE
        )
    );
}

#[test]
fn a_value_with_a_line_break_is_refused_with_pod_and_field() {
    let rejection = admit(
        &node(),
        &pod(&[("net.core.somaxconn", "1\nkernel.core_pattern=x")]),
    )
    .unwrap_err();
    assert_eq!(rejection.reason, "SysctlForbidden");
    assert!(
        rejection.message.starts_with(
            "forbidden sysctl in pod team/evil: spec.securityContext.sysctls[0].value: invalid value \"1\\nkernel.core_pattern=x\": must not contain a newline"
        ),
        "{}",
        rejection.message
    );
}
