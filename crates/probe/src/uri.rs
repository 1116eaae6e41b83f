//! The few URL operations HTTP probes need: the probe's URL and where a redirect's
//! `Location` points (absolute, scheme-relative, absolute-path or relative).

use podhost_model::probe::HttpScheme;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub scheme: HttpScheme,
    /// As written in a URL (an IPv6 address in brackets).
    pub host: String,
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
}

fn default_port(scheme: HttpScheme) -> u16 {
    match scheme {
        HttpScheme::Http => 80,
        HttpScheme::Https => 443,
    }
}

impl Url {
    /// `host:port`, the Host header and the authority.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The host without IPv6 brackets, for comparing and resolving.
    pub fn bare_host(&self) -> &str {
        self.host.trim_start_matches('[').trim_end_matches(']')
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = match self.scheme {
            HttpScheme::Http => "http",
            HttpScheme::Https => "https",
        };
        write!(f, "{scheme}://{}{}", self.authority(), self.path)
    }
}

/// `host[:port]` of an absolute URL's authority.
fn split_authority(authority: &str, scheme: HttpScheme) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let end = rest.find(']')?;
        let host = format!("[{}]", &rest[..end]);
        (host, rest[end + 1..].strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (authority.to_string(), None),
        }
    };
    let port = match port {
        None | Some("") => default_port(scheme),
        Some(p) => p.parse().ok()?,
    };
    (!host.is_empty()).then_some((host, port))
}

/// Where `location` (a redirect's header) points from `base`; `None` when it is not a
/// URL podhost can follow (another scheme, a malformed authority).
pub fn resolve(base: &Url, location: &str) -> Option<Url> {
    let absolute = |scheme: HttpScheme, rest: &str| {
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = split_authority(authority, scheme)?;
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        Some(Url {
            scheme,
            host,
            port,
            path,
        })
    };
    let lower = location.to_ascii_lowercase();
    if lower.starts_with("http://") {
        return absolute(HttpScheme::Http, &location[7..]);
    }
    if lower.starts_with("https://") {
        return absolute(HttpScheme::Https, &location[8..]);
    }
    if let Some(rest) = location.strip_prefix("//") {
        return absolute(base.scheme, rest);
    }
    if location.contains("://") {
        return None;
    }
    let path = if location.starts_with('/') {
        location.to_string()
    } else if let Some(query) = location.strip_prefix('?') {
        let base_path = base.path.split('?').next().unwrap_or("/");
        format!("{base_path}?{query}")
    } else {
        let base_path = base.path.split('?').next().unwrap_or("/");
        let dir = &base_path[..=base_path.rfind('/').unwrap_or(0)];
        format!("{dir}{location}")
    };
    Some(Url {
        path,
        ..base.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url {
            scheme: HttpScheme::Http,
            host: "127.0.0.1".into(),
            port: 8080,
            path: "/a/b?x=1".into(),
        }
    }

    #[test]
    fn relative_locations_keep_the_authority() {
        assert_eq!(
            resolve(&base(), "/ok").unwrap().to_string(),
            "http://127.0.0.1:8080/ok"
        );
        assert_eq!(
            resolve(&base(), "c").unwrap().to_string(),
            "http://127.0.0.1:8080/a/c"
        );
        assert_eq!(
            resolve(&base(), "?y=2").unwrap().to_string(),
            "http://127.0.0.1:8080/a/b?y=2"
        );
    }

    #[test]
    fn absolute_locations_take_theirs() {
        let u = resolve(&base(), "https://example.org/z").unwrap();
        assert_eq!(
            (u.scheme, u.host.as_str(), u.port, u.path.as_str()),
            (HttpScheme::Https, "example.org", 443, "/z")
        );
        let u = resolve(&base(), "http://[::1]:9/").unwrap();
        assert_eq!((u.bare_host(), u.port), ("::1", 9));
        let u = resolve(&base(), "//other:81").unwrap();
        assert_eq!(u.to_string(), "http://other:81/");
        assert_eq!(resolve(&base(), "ftp://x/"), None);
        assert_eq!(resolve(&base(), "http://h:notaport/"), None);
    }
}
