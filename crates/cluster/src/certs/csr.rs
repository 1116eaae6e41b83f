//! The node's certificate request, as the kubelet makes it: an ECDSA P-256 key, a
//! `certificates.k8s.io/v1` CertificateSigningRequest for `CN=system:node:<name>,
//! O=system:nodes` to the `kubernetes.io/kube-apiserver-client-kubelet` signer with the
//! kubelet's client usages (the ones kube-controller-manager's approver checks for
//! exactly), named `node-csr-<digest of key, subject and usages>` so that a restart
//! with the same pending key finds its request instead of posting another. Then the
//! wait for the signer's certificate, on a watch of that one object.

use std::time::Duration;

use base64::Engine;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestSpec,
};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::watcher;
use sha2::{Digest, Sha512};

use super::CertError;
use super::pair::CertPair;

/// The signer of kubelet client certificates.
pub const SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The kubelet's client usages (kube-controller-manager ≤1.26 approves only exactly
/// these three).
pub const USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];
/// The organisation of every node's certificate.
pub const NODES_GROUP: &str = "system:nodes";
/// How often a still-pending request is logged.
const PENDING_LOG_EVERY: Duration = Duration::from_secs(30);

/// A request ready to post, and its key.
#[derive(Clone)]
pub struct NodeCsr {
    pub name: String,
    pub key_pem: String,
    pub request_pem: String,
}

/// The request's subject for `node`.
pub fn common_name(node: &str) -> String {
    format!("system:node:{node}")
}

/// The kubelet's kind of name: `node-csr-` and a digest of what was asked with which key.
pub fn digested_name(public_key_der: &[u8], node: &str) -> String {
    let mut hash = Sha512::new();
    // Each part length-prefixed, so that no two different requests share a digest.
    let mut part = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_be_bytes());
        hash.update(bytes);
    };
    part(public_key_der);
    part(common_name(node).as_bytes());
    part(NODES_GROUP.as_bytes());
    for usage in USAGES {
        part(usage.as_bytes());
    }
    let digest = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash.finalize());
    format!("node-csr-{digest}")
}

/// Makes the request for `node` with `key_pem` (a pending key kept over a restart), or
/// with a new P-256 key.
pub fn make_request(node: &str, key_pem: Option<&str>) -> Result<NodeCsr, CertError> {
    let key = match key_pem {
        Some(pem) => rcgen::KeyPair::from_pem(pem)?,
        None => rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?,
    };
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, NODES_GROUP);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name(node));
    let request_pem = params.serialize_request(&key)?.pem()?;
    Ok(NodeCsr {
        name: digested_name(&rcgen::PublicKeyData::subject_public_key_info(&key), node),
        key_pem: key.serialize_pem(),
        request_pem,
    })
}

/// The CertificateSigningRequest object for `csr`.
pub fn object(csr: &NodeCsr) -> CertificateSigningRequest {
    CertificateSigningRequest {
        metadata: ObjectMeta {
            name: Some(csr.name.clone()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: ByteString(csr.request_pem.clone().into_bytes()),
            signer_name: SIGNER.to_string(),
            usages: Some(USAGES.iter().map(|u| u.to_string()).collect()),
            ..Default::default()
        },
        status: None,
    }
}

/// Where a request stands.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    Pending,
    /// The signer's certificate (PEM).
    Issued(Vec<u8>),
    Refused {
        condition: String,
        reason: String,
        message: String,
    },
}

/// Reads the request's status the way the kubelet does: Denied or Failed ends it;
/// a certificate ends it; anything else (Approved without a certificate yet) waits.
pub fn answer(csr: &CertificateSigningRequest) -> Answer {
    let Some(status) = &csr.status else {
        return Answer::Pending;
    };
    for condition in status.conditions.iter().flatten() {
        if (condition.type_ == "Denied" || condition.type_ == "Failed")
            && condition.status != "False"
        {
            return Answer::Refused {
                condition: condition.type_.clone(),
                reason: condition.reason.clone().unwrap_or_default(),
                message: condition.message.clone().unwrap_or_default(),
            };
        }
    }
    match &status.certificate {
        Some(cert) if !cert.0.is_empty() => Answer::Issued(cert.0.clone()),
        _ => Answer::Pending,
    }
}

/// Posts `csr` (or finds it, posted before a restart) and waits until it is signed;
/// returns the new pair.
pub async fn request_certificate(
    client: kube::Client,
    csr: &NodeCsr,
) -> Result<CertPair, CertError> {
    let api: Api<CertificateSigningRequest> = Api::all(client);
    let name = csr.name.clone();
    match api.create(&PostParams::default(), &object(csr)).await {
        Ok(_) => {
            tracing::info!(csr = %name, signer = SIGNER, "certificate signing request posted; waiting for approval")
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            tracing::info!(csr = %name, "certificate signing request already posted (same key); waiting for it")
        }
        Err(source) => {
            return Err(CertError::Api {
                what: format!("cannot post the certificate signing request {name}"),
                source,
            });
        }
    }
    let cert = wait_for_certificate(api, &name).await?;
    let pair = CertPair {
        cert_pem: cert,
        key_pem: csr.key_pem.clone().into_bytes(),
    };
    // The signer's certificate must go with our key: refuse anything else now rather
    // than at the next TLS handshake.
    pair.certified_key(&name)?;
    Ok(pair)
}

async fn wait_for_certificate(
    api: Api<CertificateSigningRequest>,
    name: &str,
) -> Result<Vec<u8>, CertError> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher::watcher(api, config));
    let started = tokio::time::Instant::now();
    let mut log = tokio::time::interval_at(started + PENDING_LOG_EVERY, PENDING_LOG_EVERY);
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            _ = log.tick() => {
                tracing::warn!(csr = %name, waited_secs = started.elapsed().as_secs(),
                    "certificate signing request still pending: approve it with \
                     `kubectl certificate approve {name}` or grant auto-approval");
                continue;
            }
        };
        let objects = match event {
            None => {
                return Err(CertError::Wait {
                    name: name.to_string(),
                    reason: "the watch ended".into(),
                });
            }
            Some(Err(error)) => {
                return Err(CertError::Wait {
                    name: name.to_string(),
                    reason: error.to_string(),
                });
            }
            Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => o,
            Some(Ok(_)) => continue,
        };
        match answer(&objects) {
            Answer::Pending => continue,
            Answer::Issued(cert) => {
                tracing::info!(csr = %name, waited_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX), "certificate issued");
                return Ok(cert);
            }
            Answer::Refused {
                condition,
                reason,
                message,
            } => {
                return Err(CertError::Refused {
                    name: name.to_string(),
                    condition: condition.to_lowercase(),
                    reason,
                    message,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestStatus,
    };

    #[test]
    fn the_request_asks_for_the_node_identity_with_the_kubelets_usages() {
        let csr = make_request("n1", None).unwrap();
        assert!(csr.name.starts_with("node-csr-"), "{}", csr.name);
        assert!(csr.name.len() <= 253);
        let (_, pem) = x509_parser::pem::parse_x509_pem(csr.request_pem.as_bytes()).unwrap();
        assert_eq!(pem.label, "CERTIFICATE REQUEST");
        let (_, parsed) = <x509_parser::certification_request::X509CertificationRequest as
            x509_parser::prelude::FromDer<_>>::from_der(&pem.contents)
        .unwrap();
        let subject = parsed.certification_request_info.subject.to_string();
        assert!(subject.contains("CN=system:node:n1"), "{subject}");
        assert!(subject.contains("O=system:nodes"), "{subject}");
        let object = object(&csr);
        assert_eq!(object.spec.signer_name, SIGNER);
        assert_eq!(
            object.spec.usages.unwrap(),
            ["digital signature", "key encipherment", "client auth"]
        );
    }

    #[test]
    fn the_same_pending_key_makes_the_same_request_name() {
        let first = make_request("n1", None).unwrap();
        let again = make_request("n1", Some(&first.key_pem)).unwrap();
        assert_eq!(first.name, again.name);
        assert_ne!(
            first.name,
            make_request("n2", Some(&first.key_pem)).unwrap().name
        );
        assert_ne!(first.name, make_request("n1", None).unwrap().name);
    }

    fn with(conditions: &[(&str, &str)], certificate: Option<&str>) -> CertificateSigningRequest {
        CertificateSigningRequest {
            status: Some(CertificateSigningRequestStatus {
                certificate: certificate.map(|c| ByteString(c.as_bytes().to_vec())),
                conditions: Some(
                    conditions
                        .iter()
                        .map(|(t, s)| CertificateSigningRequestCondition {
                            type_: t.to_string(),
                            status: s.to_string(),
                            reason: Some("R".into()),
                            message: Some("M".into()),
                            ..Default::default()
                        })
                        .collect(),
                ),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn approval_without_a_certificate_still_waits_and_a_denial_ends_it() {
        assert_eq!(
            answer(&CertificateSigningRequest::default()),
            Answer::Pending
        );
        assert_eq!(
            answer(&with(&[("Approved", "True")], None)),
            Answer::Pending
        );
        assert_eq!(
            answer(&with(&[("Approved", "True")], Some("PEM"))),
            Answer::Issued(b"PEM".to_vec())
        );
        assert!(matches!(
            answer(&with(&[("Denied", "True")], None)),
            Answer::Refused { condition, .. } if condition == "Denied"
        ));
        assert!(matches!(
            answer(&with(&[("Approved", "True"), ("Failed", "True")], Some(""))),
            Answer::Refused { condition, .. } if condition == "Failed"
        ));
    }
}
