//! The user a verified client certificate names, as the API server's x509
//! authenticator reads it: the subject's CommonName is the user, each Organization a
//! group. Only called for a chain rustls has already verified against the client CA.

use x509_parser::prelude::{FromDer, X509Certificate};

use podhost_model::kubelet_auth::UserInfo;

/// The user of a DER certificate; `None` when it cannot be parsed or has no CN.
pub fn user_of_certificate(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())?
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_string)
        .collect();
    Some(UserInfo {
        name,
        groups,
        ..UserInfo::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_name_is_the_user_and_organizations_are_groups() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "system:node:n1");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:nodes");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let user = user_of_certificate(cert.der()).unwrap();
        assert_eq!(user.name, "system:node:n1");
        assert_eq!(user.groups, vec!["system:nodes".to_string()]);
        assert_eq!(user_of_certificate(b"not a certificate"), None);
    }
}
