//! The kubelet's taint check at admission: only `NoExecute` taints (the scheduler
//! already honoured `NoSchedule`; `NoExecute` also means "do not run here"), matched
//! as `component-helpers/scheduling/corev1`'s `FindMatchingUntoleratedTaint` with the
//! API's `Toleration.ToleratesTaint`.

use k8s_openapi::api::core::v1::{Taint, Toleration};

/// The first `NoExecute` taint that none of `tolerations` tolerates.
pub fn untolerated_no_execute<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| t.effect == "NoExecute")
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// `ToleratesTaint`: an empty effect or key matches any; the operator `Exists` matches
/// any value, `Equal` (or none) needs the same value; any other operator matches
/// nothing (the comparison operators are an alpha feature podhost does not take).
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let empty = |s: &Option<String>| s.as_deref().unwrap_or_default().is_empty();
    if !empty(&toleration.effect) && toleration.effect.as_deref() != Some(taint.effect.as_str()) {
        return false;
    }
    if !empty(&toleration.key) && toleration.key.as_deref() != Some(taint.key.as_str()) {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::parse_taints;

    fn tolerations(yaml: &str) -> Vec<Toleration> {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn only_no_execute_taints_are_checked() {
        let taints = parse_taints("a=1:NoSchedule,b=2:PreferNoSchedule").unwrap();
        assert!(untolerated_no_execute(&taints, &[]).is_none());
        let taints = parse_taints("a=1:NoSchedule,c=3:NoExecute").unwrap();
        assert_eq!(untolerated_no_execute(&taints, &[]).unwrap().key, "c");
    }

    #[test]
    fn a_toleration_matches_key_value_and_effect() {
        let taints = parse_taints("dedicated=db:NoExecute").unwrap();
        let cases = [
            ("[{key: dedicated, value: db, effect: NoExecute}]", true),
            ("[{key: dedicated, operator: Equal, value: db}]", true),
            ("[{key: dedicated, operator: Exists}]", true),
            ("[{operator: Exists}]", true),
            ("[{key: dedicated, value: web}]", false),
            (
                "[{key: dedicated, operator: Exists, effect: NoSchedule}]",
                false,
            ),
            ("[{key: other, operator: Exists}]", false),
            ("[{key: dedicated, operator: Gt, value: \"1\"}]", false),
            (
                "[{key: other, operator: Exists}, {key: dedicated, value: db}]",
                true,
            ),
        ];
        for (yaml, tolerated) in cases {
            let found = untolerated_no_execute(&taints, &tolerations(yaml));
            assert_eq!(found.is_none(), tolerated, "{yaml}");
        }
    }

    #[test]
    fn a_taint_without_value_needs_an_empty_value_or_exists() {
        let taints = parse_taints("maintenance:NoExecute").unwrap();
        assert!(untolerated_no_execute(&taints, &tolerations("[{key: maintenance}]")).is_none());
        assert!(
            untolerated_no_execute(&taints, &tolerations("[{key: maintenance, value: x}]"))
                .is_some()
        );
    }
}
