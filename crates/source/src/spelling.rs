//! "Did you mean": the Pod field an unknown one was most likely meant to be, from the
//! names the field tables ([`FIELDS`], [`API_FIELDS`]) list beside it: the fields users
//! set.

use super::fields::{API_FIELDS, FIELDS};

/// The field name `path`'s last key was probably meant to be: the nearest name of the
/// same object in the tables (`model::spelling::nearest`).
pub fn did_you_mean(path: &str) -> Option<&'static str> {
    let (parent, typed) = split_last_key(path)?;
    let parent = normalize_indices(parent);
    // An init or ephemeral container has a container's fields (as `fields::decide_for`).
    let as_container = ["spec.initContainers", "spec.ephemeralContainers"]
        .iter()
        .find_map(|kind| parent.strip_prefix(kind))
        .map(|rest| format!("spec.containers{rest}"));
    podhost_model::spelling::nearest(
        siblings(&parent).chain(as_container.iter().flat_map(|p| siblings(p))),
        typed,
    )
}

/// `spec.containers[0].comand` → (`spec.containers[0]`, `comand`); a top-level key has
/// the empty parent.
fn split_last_key(path: &str) -> Option<(&str, &str)> {
    let (parent, key) = path.rsplit_once('.').unwrap_or(("", path));
    (!key.is_empty() && !key.contains('[')).then_some((parent, key))
}

/// `spec.containers[0].ports[12]` → `spec.containers[*].ports[*]`, the table's syntax.
fn normalize_indices(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push_str("[*]");
            }
            ']' => in_index = false,
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

/// The keys the tables list directly below `parent`.
fn siblings(parent: &str) -> impl Iterator<Item = &'static str> + '_ {
    FIELDS
        .iter()
        .chain(API_FIELDS)
        .filter_map(move |(path, _)| {
            let rest = if parent.is_empty() {
                *path
            } else {
                path.strip_prefix(parent)?.strip_prefix('.')?
            };
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            Some(&rest[..end])
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_typos_get_the_field_they_meant() {
        assert_eq!(did_you_mean("spec.containers[0].comand"), Some("command"));
        assert_eq!(
            did_you_mean("spec.containers[3].imagePullPolcy"),
            Some("imagePullPolicy")
        );
        assert_eq!(did_you_mean("spec.restartpolicy"), Some("restartPolicy"));
        assert_eq!(did_you_mean("metadata.lables"), Some("labels"));
        assert_eq!(did_you_mean("spec.initContainers[0].imag"), Some("image"));
        assert_eq!(did_you_mean("apiVersoin"), Some("apiVersion"));
    }

    #[test]
    fn a_name_far_from_every_field_gets_no_guess() {
        assert_eq!(did_you_mean("spec.containers[0].frobnicate"), None);
        assert_eq!(did_you_mean("spec.nosuchobject.x"), None);
        assert_eq!(did_you_mean("spec.containers[0]"), None);
    }
}
