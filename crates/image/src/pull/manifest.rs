//! Resolving a reference to one image manifest: fetches the manifest raw (OCI
//! or Docker v2 schema 2), and when it is an image index or Docker manifest
//! list, fetches the entry for this host's platform (linux/amd64 here).

use bytes::Bytes;
use oci_client::Client;
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
};
use oci_client::secrets::RegistryAuth;
use oci_spec::image::{ImageIndex, ImageManifest};

use super::super::layout::host_platform;
use super::super::reference::is_bare_digest;
use super::error::{Ctx, DocumentError, PullError};
use super::retry;
use super::target::Target;

/// Accept header of manifest requests.
const ACCEPT: &[&str] = &[
    OCI_IMAGE_MEDIA_TYPE,
    IMAGE_MANIFEST_MEDIA_TYPE,
    OCI_IMAGE_INDEX_MEDIA_TYPE,
    IMAGE_MANIFEST_LIST_MEDIA_TYPE,
];
/// Indexes nested deeper than this are refused.
const MAX_NESTING: usize = 4;

/// The image manifest a reference resolved to.
#[derive(Debug, Clone)]
pub(super) struct Resolved {
    /// `sha256:` digest of the image manifest.
    pub digest: String,
    /// Its bytes, exactly as served (they hash to `digest`).
    pub bytes: Bytes,
    /// Parsed.
    pub manifest: ImageManifest,
    /// The top-level index it was chosen from: `(digest, bytes)`.
    pub index: Option<(String, Bytes)>,
}

/// What a manifest document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Index,
    Manifest,
}

/// Fetches and resolves the manifest `target` names.
pub(super) async fn resolve(
    client: &Client,
    target: &Target,
    auth: &RegistryAuth,
    ctx: &Ctx,
) -> Result<Resolved, PullError> {
    let platform = host_platform();
    let mut index: Option<(String, Bytes)> = None;
    let mut reference = target.manifest_ref();
    for _ in 0..=MAX_NESTING {
        let (bytes, digest) = retry::oci(ctx, "manifest", || {
            client.pull_manifest_raw(&reference, auth, ACCEPT)
        })
        .await?;
        if !is_bare_digest(&digest) {
            return Err(ctx.bad(format!(
                "the registry names the manifest {digest}; only sha256 digests are supported"
            )));
        }
        match kind(&bytes).map_err(|e| ctx.document(format!("manifest {digest}"), e))? {
            Kind::Manifest => {
                let manifest = ImageManifest::from_reader(&bytes[..])
                    .map_err(|e| ctx.bad(format!("cannot parse image manifest {digest}: {e}")))?;
                return Ok(Resolved {
                    digest,
                    bytes,
                    manifest,
                    index,
                });
            }
            Kind::Index => {
                let parsed = ImageIndex::from_reader(&bytes[..])
                    .map_err(|e| ctx.bad(format!("cannot parse image index {digest}: {e}")))?;
                let chosen =
                    select(&parsed, &platform).ok_or_else(|| PullError::NoMatchingPlatform {
                        reference: ctx.reference.clone(),
                        digest: digest.clone(),
                        platform: platform.clone(),
                    })?;
                tracing::debug!(reference = %ctx.reference, index = %digest, manifest = %chosen,
                    %platform, "resolved image index");
                reference = target.at_digest(&chosen);
                if index.is_none() {
                    index = Some((digest, bytes));
                }
            }
        }
    }
    Err(ctx.bad(format!("image indexes nested deeper than {MAX_NESTING}")))
}

/// The digest of the first entry for `platform` ("linux/amd64").
fn select(index: &ImageIndex, platform: &str) -> Option<String> {
    index
        .manifests()
        .iter()
        .find(|m| {
            m.platform()
                .as_ref()
                .is_some_and(|p| format!("{}/{}", p.os(), p.architecture()) == platform)
        })
        .map(|m| m.digest().to_string())
}

/// Classifies a manifest document by its `mediaType`, or its shape when absent.
fn kind(bytes: &[u8]) -> Result<Kind, DocumentError> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(DocumentError::NotJson)?;
    if v.get("schemaVersion").and_then(|s| s.as_u64()) == Some(1) {
        return Err(DocumentError::Schema1);
    }
    match v.get("mediaType").and_then(|m| m.as_str()) {
        Some(OCI_IMAGE_INDEX_MEDIA_TYPE | IMAGE_MANIFEST_LIST_MEDIA_TYPE) => Ok(Kind::Index),
        Some(OCI_IMAGE_MEDIA_TYPE | IMAGE_MANIFEST_MEDIA_TYPE) => Ok(Kind::Manifest),
        Some(other) => Err(DocumentError::UnsupportedMediaType(other.to_string())),
        None if v.get("manifests").is_some() => Ok(Kind::Index),
        None if v.get("config").is_some() && v.get("layers").is_some() => Ok(Kind::Manifest),
        None => Err(DocumentError::Unrecognized),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let ok = |doc: &[u8]| kind(doc).ok();
        assert_eq!(
            ok(br#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json"}"#),
            Some(Kind::Manifest)
        );
        assert_eq!(
            ok(br#"{"schemaVersion":2,"config":{},"layers":[]}"#),
            Some(Kind::Manifest)
        );
        assert_eq!(
            ok(br#"{"schemaVersion":2,"manifests":[]}"#),
            Some(Kind::Index)
        );
        assert_eq!(
            ok(br#"{"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json"}"#),
            Some(Kind::Index)
        );
        assert!(matches!(
            kind(br#"{"schemaVersion":1}"#),
            Err(DocumentError::Schema1)
        ));
        assert!(matches!(
            kind(br#"{"mediaType":"x/y"}"#),
            Err(DocumentError::UnsupportedMediaType(t)) if t == "x/y"
        ));
        assert!(matches!(kind(b"nope"), Err(DocumentError::NotJson(_))));
        assert!(matches!(kind(b"{}"), Err(DocumentError::Unrecognized)));
    }

    #[test]
    fn docker_manifest_list_selects_amd64() {
        let d = |c: char| format!("sha256:{}", c.to_string().repeat(64));
        let list = format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json",
            "manifests":[
              {{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":"{}","size":1,
                "platform":{{"architecture":"arm64","os":"linux","variant":"v8"}}}},
              {{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":"{}","size":1,
                "platform":{{"architecture":"amd64","os":"linux"}}}}]}}"#,
            d('a'),
            d('b')
        );
        let index = ImageIndex::from_reader(list.as_bytes()).unwrap();
        assert_eq!(select(&index, "linux/amd64"), Some(d('b')));
        assert_eq!(select(&index, "linux/s390x"), None);
    }
}
