//! The API server's rules for a pod's sysctls (`validateSysctls`): every name is a
//! sysctl name (segments joined by `.` or `/`, so never a path that climbs out of
//! `/proc/sys/`), named once, and every value is one line. Names are compared in their
//! normalized form: `net/core/somaxconn` and `net.core.somaxconn` are one sysctl, and
//! the runtime would keep only one of their values.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::PodSpec;

use super::Errs;
use crate::error::ValueError;
use podhost_model::sysctl::{is_valid_name, is_valid_value, normalize};

pub(super) fn validate(spec: &PodSpec, errs: &mut Errs) {
    let sysctls = spec
        .security_context
        .as_ref()
        .and_then(|s| s.sysctls.as_deref())
        .unwrap_or_default();
    let mut seen: HashMap<String, String> = HashMap::new();
    for (i, sysctl) in sysctls.iter().enumerate() {
        let at = format!("spec.securityContext.sysctls[{i}]");
        let name = sysctl.name.as_str();
        if name.is_empty() {
            errs.bare(
                format!("{at}.name"),
                ValueError::Required {
                    hint: "name the sysctl, e.g. net.ipv4.ip_local_port_range",
                },
            );
        } else if !is_valid_name(name) {
            // Escaped: the message is one line of an event and of the log.
            errs.invalid(
                format!("{at}.name"),
                name.escape_debug(),
                ValueError::SysctlName,
            );
        } else if let Some(first) = seen.get(&normalize(name)) {
            errs.bare(
                format!("{at}.name"),
                ValueError::Duplicate {
                    what: "sysctl",
                    name: name.to_string(),
                    first: first.clone(),
                },
            );
        } else {
            seen.insert(normalize(name), at.clone());
        }
        if !is_valid_value(&sysctl.value) {
            errs.invalid(
                format!("{at}.value"),
                sysctl.value.escape_debug(),
                ValueError::SysctlValue,
            );
        }
    }
}
