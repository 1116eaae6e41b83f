//! The API server's name formats (`k8s.io/apimachinery/pkg/util/validation`).

use crate::error::ValueError;

/// A DNS-1123 label: 1–63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub(crate) fn dns1123_label(s: &str) -> Result<(), ValueError> {
    if is_label(s) {
        Ok(())
    } else {
        Err(ValueError::NotDns1123Label)
    }
}

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain: at most 253 characters, dot-separated DNS-1123 labels.
pub fn dns1123_subdomain(s: &str) -> Result<(), ValueError> {
    if !s.is_empty() && s.len() <= 253 && s.split('.').all(is_label) {
        Ok(())
    } else {
        Err(ValueError::NotDns1123Subdomain)
    }
}

/// `IsValidPortName`: at most 15 of `[a-z0-9-]`, at least one letter, no `--`, not
/// starting or ending with `-`.
pub(crate) fn iana_svc_name(s: &str) -> Result<(), ValueError> {
    let ok = !s.is_empty()
        && s.len() <= 15
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_lowercase())
        && !s.contains("--")
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(ValueError::NotIanaSvcName)
    }
}

/// An environment variable name as the API server checks it since
/// `RelaxedEnvironmentVariableValidation` (GA in 1.34): printable ASCII other than `=`
/// (`NAME=x` would set another variable than the one written).
pub(crate) fn env_var_name(s: &str) -> Result<(), ValueError> {
    if !s.is_empty() && !s.contains('=') && s.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        Ok(())
    } else {
        Err(ValueError::EnvName)
    }
}

/// `IsQualifiedName` (label and annotation keys): `[prefix/]name`, the prefix a DNS
/// subdomain, the name 1–63 of `[A-Za-z0-9-_.]` starting and ending alphanumeric.
pub(crate) fn qualified_name(s: &str) -> Result<(), ValueError> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let prefix_ok = prefix.is_none_or(|p| dns1123_subdomain(p).is_ok());
    if prefix_ok && !name.is_empty() && name.len() <= 63 && is_label_value_text(name) {
        Ok(())
    } else {
        Err(ValueError::QualifiedName)
    }
}

/// `IsValidLabelValue`: empty, or at most 63 of `[A-Za-z0-9-_.]` starting and ending
/// alphanumeric.
pub(crate) fn label_value(s: &str) -> Result<(), ValueError> {
    if s.is_empty() || (s.len() <= 63 && is_label_value_text(s)) {
        Ok(())
    } else {
        Err(ValueError::LabelValue)
    }
}

fn is_label_value_text(s: &str) -> bool {
    let alnum = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    alnum(s.bytes().next())
        && alnum(s.bytes().last())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// An HTTP header field name (RFC 7230 token).
pub(crate) fn http_header_name(s: &str) -> Result<(), ValueError> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if !s.is_empty() && s.bytes().all(token) {
        Ok(())
    } else {
        Err(ValueError::HeaderName)
    }
}

/// `validateLocalDescendingPath`: relative, and no `..` element.
pub(crate) fn descending_path(s: &str) -> Result<(), ValueError> {
    if s.starts_with('/') || s.split('/').any(|part| part == "..") {
        Err(ValueError::NotDescending)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Check = fn(&str) -> Result<(), ValueError>;

    #[test]
    fn formats() {
        let table: &[(Check, &str, bool)] = &[
            (dns1123_label, "web-1", true),
            (dns1123_label, "Web", false),
            (dns1123_label, "-a", false),
            (dns1123_label, &"a".repeat(63), true),
            (dns1123_label, "", false),
            (dns1123_subdomain, "web.example-1", true),
            (dns1123_subdomain, "../etc", false),
            (dns1123_subdomain, "a/b", false),
            (dns1123_subdomain, "a..b", false),
            (iana_svc_name, "http", true),
            (iana_svc_name, "metrics-2", true),
            (iana_svc_name, "8080", false),
            (iana_svc_name, "a--b", false),
            (iana_svc_name, "sixteen-chars-ab", false),
            (iana_svc_name, "Http", false),
            (env_var_name, "HOME", true),
            (env_var_name, "my.var-1", true),
            (env_var_name, "1ST", true),
            (env_var_name, "A=B", false),
            (env_var_name, "", false),
            (env_var_name, "tab\there", false),
            (qualified_name, "app", true),
            (qualified_name, "app.kubernetes.io/name", true),
            (qualified_name, "tier/", false),
            (qualified_name, "UPPER/x", false),
            (qualified_name, "_x", false),
            (label_value, "", true),
            (label_value, "v1.2_3", true),
            (label_value, "-x", false),
            (label_value, &"x".repeat(64), false),
            (http_header_name, "X-Custom", true),
            (http_header_name, "Bad Header", false),
            (descending_path, "a/b", true),
            (descending_path, "a/..b", true),
            (descending_path, "/abs", false),
            (descending_path, "a/../b", false),
        ];
        for (i, (check, input, ok)) in table.iter().enumerate() {
            assert_eq!(check(input).is_ok(), *ok, "row {i}: {input:?}");
        }
    }
}
