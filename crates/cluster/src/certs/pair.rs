//! A client certificate chain with its private key, as PEM (the kubelet keeps both in
//! one `kubelet-client-<time>.pem` file): parsed for its validity and serial, and
//! turned into what rustls presents.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

use super::CertError;

/// A certificate chain (leaf first) and the leaf's key, both PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct CertPair {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for CertPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("CertPair")
            .field("cert_pem_len", &self.cert_pem.len())
            .finish_non_exhaustive()
    }
}

/// When the leaf certificate is valid, and its serial (how a rotation is seen).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validity {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    /// Hex, as `openssl x509 -serial` prints it (upper case, no colons).
    pub serial: String,
}

impl Validity {
    /// Whether the certificate is still valid at `now` (the kubelet's test of a
    /// kubeconfig's certificate before it bootstraps again).
    pub fn valid_at(&self, now: SystemTime) -> bool {
        now < self.not_after
    }
}

impl CertPair {
    /// Splits one PEM text holding both (the cert dir's files): every CERTIFICATE
    /// block, then the private key block.
    pub fn from_combined(what: &str, pem: &[u8]) -> Result<Self, CertError> {
        let text = std::str::from_utf8(pem).map_err(|e| CertError::pem(what, e))?;
        let mut cert_pem = String::new();
        let mut key_pem = String::new();
        let mut block = String::new();
        for line in text.lines() {
            block.push_str(line);
            block.push('\n');
            if line.starts_with("-----END ") {
                if line.contains("CERTIFICATE") {
                    cert_pem.push_str(&block);
                } else if line.contains("PRIVATE KEY") {
                    key_pem.push_str(&block);
                }
                block.clear();
            }
        }
        let pair = Self {
            cert_pem: cert_pem.into_bytes(),
            key_pem: key_pem.into_bytes(),
        };
        pair.certified_key(what)?;
        Ok(pair)
    }

    /// The one-file form: the chain, then the key.
    pub fn combined(&self) -> Vec<u8> {
        let mut out = self.cert_pem.clone();
        out.extend_from_slice(&self.key_pem);
        out
    }

    /// The leaf's validity and serial.
    pub fn validity(&self, what: &str) -> Result<Validity, CertError> {
        let leaf = self
            .chain(what)?
            .into_iter()
            .next()
            .ok_or_else(|| CertError::pem(what, "no CERTIFICATE block"))?;
        let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref())
            .map_err(|e| CertError::pem(what, e))?;
        let at = |t: x509_parser::time::ASN1Time| {
            let secs = t.timestamp();
            if secs >= 0 {
                SystemTime::UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
            } else {
                SystemTime::UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
            }
        };
        Ok(Validity {
            not_before: at(cert.validity().not_before),
            not_after: at(cert.validity().not_after),
            serial: hex::encode_upper(cert.raw_serial()),
        })
    }

    fn chain(&self, what: &str) -> Result<Vec<CertificateDer<'static>>, CertError> {
        CertificateDer::pem_slice_iter(&self.cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CertError::pem(what, e))
    }

    /// What rustls presents: the chain and a signer for the key.
    pub fn certified_key(&self, what: &str) -> Result<Arc<CertifiedKey>, CertError> {
        let chain = self.chain(what)?;
        if chain.is_empty() {
            return Err(CertError::pem(what, "no CERTIFICATE block"));
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key_pem)
            .map_err(|e| CertError::pem(what, format!("private key: {e}")))?;
        let signer = rustls::crypto::aws_lc_rs::sign::any_supported_type(&key)
            .map_err(|e| CertError::pem(what, e))?;
        Ok(Arc::new(CertifiedKey::new(chain, signer)))
    }
}

/// A self-signed P-256 pair for `common_name`, valid `days` from 2025-01-01, serial
/// 0ABC: for the certificate modules' tests.
#[cfg(test)]
pub(super) fn self_signed_for_tests(common_name: &str, days: i64) -> CertPair {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, common_name);
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after =
        params.not_before + std::time::Duration::from_secs(86400 * days.unsigned_abs());
    params.serial_number = Some(rcgen::SerialNumber::from_slice(&[0x0a, 0xbc]));
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = params.self_signed(&key).unwrap();
    CertPair {
        cert_pem: cert.pem().into_bytes(),
        key_pem: key.serialize_pem().into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn self_signed(days: i64) -> CertPair {
        super::self_signed_for_tests("system:node:n1", days)
    }

    #[test]
    fn the_combined_file_splits_back_into_the_same_pair() {
        let pair = self_signed(2);
        let back = CertPair::from_combined("test", &pair.combined()).unwrap();
        assert_eq!(back, pair);
        let validity = back.validity("test").unwrap();
        assert_eq!(validity.serial, "0ABC");
        assert_eq!(
            validity
                .not_after
                .duration_since(validity.not_before)
                .unwrap(),
            Duration::from_secs(2 * 86400)
        );
        assert!(validity.valid_at(validity.not_before));
        assert!(!validity.valid_at(validity.not_after));
    }

    #[test]
    fn a_file_without_its_key_is_refused() {
        let pair = self_signed(1);
        let error = CertPair::from_combined("half", &pair.cert_pem).unwrap_err();
        assert!(error.to_string().contains("half"), "{error}");
    }
}
