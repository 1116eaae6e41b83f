//! `resources.requests` / `resources.limits`: names, quantities, request ≤ limit.
//! A quantity that does not parse would otherwise run the container without the limit
//! the user wrote, so every one is parsed with [`podhost_model::quantity`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Written;

use super::Errs;
use super::container::Ctx;
use super::names::qualified_name;
use crate::error::ValueError;
use podhost_model::quantity::Quantity;

pub(super) fn validate(ctx: &Ctx<'_>, c: &Container, errs: &mut Errs) {
    let Some(r) = c.resources.as_ref() else {
        return;
    };
    let requests = parse_all(ctx, "requests", &r.requests, errs);
    let limits = parse_all(ctx, "limits", &r.limits, errs);
    for (name, (request, written)) in &requests {
        let field = ctx.field(&format!("resources.requests.{name}"));
        match limits.get(name) {
            Some((limit, limit_written)) if is_extended(name) && request != limit => {
                errs.invalid(
                    field,
                    written,
                    ValueError::RequestNotLimit {
                        resource: name.clone(),
                        limit: limit_written.clone(),
                    },
                );
            }
            Some((limit, limit_written)) if request > limit => errs.invalid(
                field,
                written,
                ValueError::RequestAboveLimit {
                    resource: name.clone(),
                    limit: limit_written.clone(),
                },
            ),
            None if is_extended(name) => errs.bare(
                ctx.field(&format!("resources.limits.{name}")),
                ValueError::Required {
                    hint: "an extended resource that is requested needs the same limit",
                },
            ),
            _ => {}
        }
    }
}

/// Parses one map; the valid, non-negative entries by name (with their text).
fn parse_all(
    ctx: &Ctx<'_>,
    kind: &str,
    map: &Option<BTreeMap<String, Written>>,
    errs: &mut Errs,
) -> BTreeMap<String, (Quantity, String)> {
    let mut out = BTreeMap::new();
    for (name, written) in map.iter().flatten() {
        let field = ctx.field(&format!("resources.{kind}.{name}"));
        if !is_standard(name) && !is_extended(name) {
            errs.invalid(&field, name, ValueError::ResourceName);
            continue;
        }
        let q = match Quantity::parse(&written.0) {
            Ok(q) => q,
            Err(e) => {
                errs.invalid(&field, &written.0, ValueError::Quantity(e));
                continue;
            }
        };
        // Reading it at the scale podhost uses catches values that do not fit.
        let fits = if name == "cpu" {
            q.milli_value()
        } else {
            q.value()
        };
        if let Err(e) = fits {
            errs.invalid(&field, &written.0, ValueError::Quantity(e));
            continue;
        }
        if q.is_negative() {
            errs.invalid(&field, &written.0, ValueError::Negative);
            continue;
        }
        if (name.starts_with("hugepages-") || is_extended(name)) && !q.is_integer() {
            errs.invalid(&field, &written.0, ValueError::NotInteger);
            continue;
        }
        out.insert(name.clone(), (q, written.0.clone()));
    }
    out
}

/// The resources a container may name without a domain.
fn is_standard(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage")
        || name
            .strip_prefix("hugepages-")
            .is_some_and(|size| Quantity::parse(size).is_ok_and(|q| !q.is_zero()))
}

/// An extended resource: `domain/name`, outside `kubernetes.io` (`nvidia.com/gpu`).
fn is_extended(name: &str) -> bool {
    name.split_once('/').is_some_and(|(domain, _)| {
        let reserved = domain == "kubernetes.io" || domain.ends_with(".kubernetes.io");
        !reserved && !name.starts_with("requests.") && qualified_name(name).is_ok()
    })
}
