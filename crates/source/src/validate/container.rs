//! One container's rules (regular, init or sidecar) and its environment.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, EnvVarSource};

use super::names::{dns1123_label, env_var_name};
use super::{Errs, downward, ports, probes, resources, volumes};
use crate::error::ValueError;

/// Which list a container is in, as the rules differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `spec.containers`.
    Regular,
    /// `spec.initContainers` that run to completion.
    Init,
    /// `spec.initContainers` with `restartPolicy: Always`.
    Sidecar,
}

/// What a container's rules need from the rest of the pod.
pub(super) struct Ctx<'a> {
    /// The container's JSON path (`spec.containers[0]`).
    pub at: &'a str,
    pub kind: Kind,
    /// The names of the pod's volumes.
    pub volumes: &'a HashSet<String>,
    pub host_network: bool,
}

impl Ctx<'_> {
    /// The JSON path of a field of this container.
    pub fn field(&self, rest: &str) -> String {
        format!("{}.{rest}", self.at)
    }
}

pub(super) fn validate(ctx: &Ctx<'_>, c: &Container, errs: &mut Errs) {
    if !c.name.is_empty() {
        errs.check(ctx.field("name"), &c.name, dns1123_label(&c.name));
    }
    let image = c.image.as_deref().unwrap_or_default();
    if image.trim() != image {
        errs.invalid(ctx.field("image"), image, ValueError::ImageWhitespace);
    }
    if let Some(p) = c.image_pull_policy.as_deref() {
        errs.one_of(
            ctx.field("imagePullPolicy"),
            p,
            &["Always", "IfNotPresent", "Never"],
        );
    }
    if let Some(p) = c.termination_message_policy.as_deref() {
        errs.one_of(
            ctx.field("terminationMessagePolicy"),
            p,
            &["File", "FallbackToLogsOnError"],
        );
    }
    restart_policy(ctx, c, errs);
    env(ctx, c, errs);
    resources::validate(ctx, c, errs);
    ports::validate(ctx, c, errs);
    probes::validate(ctx, c, errs);
    volumes::validate_mounts(ctx, c, errs);
}

/// Container-level `restartPolicy`: only `Always`, only on init containers (a
/// sidecar). Init containers that run to completion take no probes or lifecycle.
fn restart_policy(ctx: &Ctx<'_>, c: &Container, errs: &mut Errs) {
    match (ctx.kind, c.restart_policy.as_deref()) {
        (Kind::Regular, Some(p)) => errs.invalid(
            ctx.field("restartPolicy"),
            p,
            ValueError::Forbidden {
                why: "on a regular container; only init containers take restartPolicy (Always, for a sidecar), the pod's spec.restartPolicy applies here",
            },
        ),
        (Kind::Init, Some(p)) => {
            errs.one_of(ctx.field("restartPolicy"), p, &["Always"]);
        }
        _ => {}
    }
    if ctx.kind == Kind::Init {
        let set = [
            ("lifecycle", c.lifecycle.is_some()),
            ("livenessProbe", c.liveness_probe.is_some()),
            ("readinessProbe", c.readiness_probe.is_some()),
            ("startupProbe", c.startup_probe.is_some()),
        ];
        for (field, present) in set {
            if present {
                errs.bare(
                    ctx.field(field),
                    ValueError::Forbidden {
                        why: "on an init container that runs to completion; give it restartPolicy: Always to make it a sidecar, or remove the field",
                    },
                );
            }
        }
    }
}

fn env(ctx: &Ctx<'_>, c: &Container, errs: &mut Errs) {
    for (i, e) in c.env.iter().flatten().enumerate() {
        let at = ctx.field(&format!("env[{i}]"));
        errs.check(format!("{at}.name"), &e.name, env_var_name(&e.name));
        if let Some(from) = &e.value_from {
            if e.value.as_deref().is_some_and(|v| !v.is_empty()) {
                errs.bare(
                    format!("{at}.valueFrom"),
                    ValueError::Forbidden {
                        why: "together with a non-empty value; keep one of them",
                    },
                );
            }
            value_from(&format!("{at}.valueFrom"), from, errs);
        }
    }
    for (i, from) in c.env_from.iter().flatten().enumerate() {
        let at = ctx.field(&format!("envFrom[{i}]"));
        if let Some(prefix) = from.prefix.as_deref()
            && !prefix.is_empty()
        {
            errs.check(format!("{at}.prefix"), prefix, env_var_name(prefix));
        }
        let refs = [
            (
                "configMapRef",
                from.config_map_ref.as_ref().map(|r| r.name.as_str()),
            ),
            (
                "secretRef",
                from.secret_ref.as_ref().map(|r| r.name.as_str()),
            ),
        ];
        one_source(
            &at,
            &refs.map(|(k, v)| (k, v.is_some())),
            &["configMapRef", "secretRef"],
            errs,
        );
        for (key, name) in refs {
            if let Some(name) = name {
                required_name(&format!("{at}.{key}.name"), name, errs);
            }
        }
    }
}

fn value_from(at: &str, from: &EnvVarSource, errs: &mut Errs) {
    let set = [
        ("fieldRef", from.field_ref.is_some()),
        ("resourceFieldRef", from.resource_field_ref.is_some()),
        ("configMapKeyRef", from.config_map_key_ref.is_some()),
        ("secretKeyRef", from.secret_key_ref.is_some()),
        ("fileKeyRef", from.file_key_ref.is_some()),
    ];
    one_source(
        at,
        &set,
        &[
            "fieldRef",
            "resourceFieldRef",
            "configMapKeyRef",
            "secretKeyRef",
            "fileKeyRef",
        ],
        errs,
    );
    if let Some(f) = &from.field_ref {
        downward::field_ref(&format!("{at}.fieldRef"), f, downward::Use::Env, errs);
    }
    if let Some(r) = &from.resource_field_ref {
        downward::resource_field_ref(
            &format!("{at}.resourceFieldRef"),
            r,
            downward::Use::Env,
            errs,
        );
    }
    for (key, name, item) in [
        (
            "configMapKeyRef",
            from.config_map_key_ref.as_ref().map(|r| r.name.as_str()),
            from.config_map_key_ref.as_ref().map(|r| r.key.as_str()),
        ),
        (
            "secretKeyRef",
            from.secret_key_ref.as_ref().map(|r| r.name.as_str()),
            from.secret_key_ref.as_ref().map(|r| r.key.as_str()),
        ),
    ] {
        if let (Some(name), Some(item)) = (name, item) {
            required_name(&format!("{at}.{key}.name"), name, errs);
            if item.is_empty() {
                errs.bare(
                    format!("{at}.{key}.key"),
                    ValueError::Required {
                        hint: "name the key whose value to use",
                    },
                );
            }
        }
    }
}

/// Exactly one of a one-of (`set` pairs each alternative with whether it is present).
pub(super) fn one_source(
    at: &str,
    set: &[(&'static str, bool)],
    choices: &'static [&'static str],
    errs: &mut Errs,
) {
    let found: Vec<String> = set
        .iter()
        .filter(|(_, present)| *present)
        .map(|(name, _)| (*name).to_string())
        .collect();
    match found.len() {
        0 => errs.bare(at, ValueError::NoneOf { choices }),
        1 => {}
        _ => errs.bare(at, ValueError::SeveralOf { found }),
    }
}

/// The name of a ConfigMap or Secret: required, a DNS subdomain.
pub(super) fn required_name(field: &str, name: &str, errs: &mut Errs) {
    if name.is_empty() {
        errs.bare(
            field,
            ValueError::Required {
                hint: "name the ConfigMap or Secret",
            },
        );
    } else {
        errs.check(field, name, super::names::dns1123_subdomain(name));
    }
}
