//! Reading what `podhost load` is given: an OCI image layout directory, or an
//! oci-archive (a tar of such a layout, optionally gzipped).
//!
//! A directory's blobs are copied into the store on demand (verified). An archive
//! is streamed once: every `blobs/sha256/<hex>` entry goes straight into the store
//! (verified), `index.json` is kept in memory. Either way, everything after
//! [`Source::open`] reads blobs from the store.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use oci_spec::image::{Descriptor, ImageIndex};

use super::blobs::Blobs;
use super::compress::{Compression, decompressed};
use super::error::{ImageError, IoContext};
use super::naming::{self, RawName};

const MAX_INDEX: u64 = 16 << 20;
const REF_NAME: &str = "org.opencontainers.image.ref.name";
const CONTAINERD_NAME: &str = "io.containerd.image.name";
const MAX_NESTING: usize = 4;

/// An image found in a layout's index.json.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoundImage {
    /// Normalized reference.
    pub reference: String,
    /// Digest of the platform-specific manifest.
    pub manifest: String,
    /// Size of that manifest.
    pub manifest_size: u64,
    /// Digest of the top-level image index it was chosen from, if any.
    pub index: Option<String>,
}

/// An opened layout or archive.
pub(crate) struct Source {
    path: PathBuf,
    /// The layout directory; `None` for an archive (blobs are already in the store).
    dir: Option<PathBuf>,
    index_json: Vec<u8>,
}

impl Source {
    /// Opens `path`: a layout directory or an oci-archive file.
    pub(crate) fn open(path: &Path, blobs: &Blobs) -> Result<Source, ImageError> {
        let meta = std::fs::metadata(path).ctx("open", path)?;
        if meta.is_dir() {
            let index_path = path.join("index.json");
            if !index_path.is_file() {
                return Err(not_a_layout(path, "no index.json in the directory"));
            }
            check_layout_file(path, &path.join("oci-layout"));
            let index_json = read_limited(File::open(&index_path).ctx("open", &index_path)?)
                .ctx("read", &index_path)?;
            return Ok(Source {
                path: path.to_path_buf(),
                dir: Some(path.to_path_buf()),
                index_json,
            });
        }
        Self::open_archive(path, blobs)
    }

    fn open_archive(path: &Path, blobs: &Blobs) -> Result<Source, ImageError> {
        let file = File::open(path).ctx("open", path)?;
        let (kind, stream) = decompressed(file).ctx("read", path)?;
        if kind == Compression::Zstd {
            return Err(not_a_layout(
                path,
                "zstd-compressed files are not supported",
            ));
        }
        let mut archive = tar::Archive::new(stream);
        let mut index_json = None;
        let mut saw_docker_manifest = false;
        let (mut count, mut ingested) = (0usize, 0usize);
        let entries = archive
            .entries()
            .map_err(|e| not_a_layout(path, &format!("not a tar archive ({e})")))?;
        for entry in entries {
            let mut entry =
                entry.map_err(|e| not_a_layout(path, &format!("not a tar archive ({e})")))?;
            count += 1;
            let raw = entry.path().ctx("read entry of", path)?.into_owned();
            let parts: Vec<String> = raw
                .components()
                .filter_map(|c| match c {
                    Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                    _ => None,
                })
                .collect();
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            let is_file = entry.header().entry_type().is_file();
            match (parts.as_slice(), is_file) {
                (["index.json"], true) => {
                    index_json = Some(read_limited(&mut entry).ctx("read index.json of", path)?);
                }
                (["manifest.json"], true) => saw_docker_manifest = true,
                (["blobs", "sha256", hex], true) => {
                    let digest = format!("sha256:{hex}");
                    let what = format!("{}:{}", path.display(), raw.display());
                    let size = entry.size();
                    blobs.ingest(&mut entry, &digest, Some(size), &what)?;
                    ingested += 1;
                }
                (["blobs", alg, _], true) => {
                    tracing::warn!(archive = %path.display(), entry = %raw.display(),
                        "skipping blob with unsupported digest algorithm {alg}");
                }
                _ => {}
            }
        }
        tracing::info!(archive = %path.display(), entries = count, blobs = ingested, "read oci-archive");
        let Some(index_json) = index_json else {
            if saw_docker_manifest {
                // docker-archive (`docker save`): manifest.json and no index.json.
                return Ok(Source {
                    path: path.to_path_buf(),
                    dir: None,
                    index_json: super::docker_archive::import(path, blobs)?,
                });
            }
            let reason = if count == 0 {
                "empty or not a tar archive"
            } else {
                "no index.json in the archive"
            };
            return Err(not_a_layout(path, reason));
        };
        Ok(Source {
            path: path.to_path_buf(),
            dir: None,
            index_json,
        })
    }

    /// The path given to `load`.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Makes sure the blob of `desc` is in the store (copying it from the layout
    /// directory, verified) and checks its size.
    pub(crate) fn fetch(&self, blobs: &Blobs, desc: &Descriptor) -> Result<PathBuf, ImageError> {
        let digest = desc.digest().to_string();
        let hex = super::digest::sha256_hex(&digest)?;
        let stored = match &self.dir {
            Some(dir) => {
                let src = dir.join("blobs").join("sha256").join(hex);
                blobs.ingest_file(&src, &digest, Some(desc.size()))?
            }
            None => {
                if !blobs.contains(&digest)? {
                    return Err(ImageError::MissingBlob {
                        digest,
                        source_path: self.path.clone(),
                    });
                }
                blobs.path(&digest)?
            }
        };
        let actual = blobs.size(&digest)?;
        if actual != desc.size() {
            return Err(ImageError::DigestMismatch {
                what: format!("{}: blob {digest}", self.path.display()),
                expected: format!("{} bytes", desc.size()),
                actual: format!("{actual} bytes"),
            });
        }
        Ok(stored)
    }

    /// The named images of the layout, one per reference, each resolved to the
    /// manifest for `platform` ("linux/amd64") when it points to an image index.
    /// References come from the annotations or from `name` (`load --name`), as
    /// `naming` decides. Fetches the index and manifest blobs into the store.
    pub(crate) fn images(
        &self,
        blobs: &Blobs,
        platform: &str,
        name: Option<&str>,
    ) -> Result<Vec<FoundImage>, ImageError> {
        let index =
            ImageIndex::from_reader(&self.index_json[..]).map_err(|e| ImageError::BadJson {
                what: format!("{}/index.json", self.path.display()),
                reason: super::error::with_causes(&e),
            })?;
        let mut other_platform = None;
        let mut candidates = Vec::new();
        for desc in index.manifests() {
            if let Some(p) = desc.platform() {
                let p = format!("{}/{}", p.os(), p.architecture());
                if p != platform {
                    tracing::debug!(digest = %desc.digest(), platform = %p,
                        "skipping manifest for another platform");
                    other_platform = Some(desc.digest().to_string());
                    continue;
                }
            }
            candidates.push(desc);
        }
        let entries: Vec<naming::Entry> = candidates
            .iter()
            .map(|desc| naming::Entry {
                digest: desc.digest().to_string(),
                raw: raw_name(desc),
            })
            .collect();
        let names = naming::assign(&self.path, &entries, name)?;
        let mut found: HashMap<String, FoundImage> = HashMap::new();
        for (desc, reference) in candidates.into_iter().zip(names) {
            let Some(reference) = reference else {
                tracing::warn!(source = %self.path.display(), digest = %desc.digest(),
                    "skipping a manifest that has no name (or not the one --name chose)");
                continue;
            };
            let Some((manifest, manifest_size, index)) = self.select(blobs, desc, platform, 0)?
            else {
                continue;
            };
            found.insert(
                reference.clone(),
                FoundImage {
                    reference,
                    manifest,
                    manifest_size,
                    index,
                },
            );
        }
        if let (true, Some(digest)) = (found.is_empty(), other_platform) {
            return Err(ImageError::NoMatchingPlatform {
                digest,
                platform: platform.to_string(),
            });
        }
        if found.is_empty() {
            return Err(ImageError::NoNamedImages {
                path: self.path.clone(),
            });
        }
        let mut out: Vec<FoundImage> = found.into_values().collect();
        out.sort_by(|a, b| a.reference.cmp(&b.reference));
        Ok(out)
    }

    /// Follows `desc` down to an image manifest for `platform`. Returns
    /// `(manifest digest, manifest size, top-level index digest)`, or `None` for
    /// content that is not an image (artifacts, attestations).
    fn select(
        &self,
        blobs: &Blobs,
        desc: &Descriptor,
        platform: &str,
        depth: usize,
    ) -> Result<Option<(String, u64, Option<String>)>, ImageError> {
        let digest = desc.digest().to_string();
        self.fetch(blobs, desc)?;
        match kind_of(blobs, desc)? {
            Kind::Manifest => Ok(Some((digest, desc.size(), None))),
            Kind::Other => {
                tracing::warn!(%digest, media_type = %desc.media_type(), "skipping non-image content");
                Ok(None)
            }
            Kind::Index if depth >= MAX_NESTING => Err(ImageError::BadJson {
                what: digest,
                reason: format!("image indexes nested deeper than {MAX_NESTING}"),
            }),
            Kind::Index => {
                let data = blobs.read_json_bytes(&digest)?;
                let index =
                    ImageIndex::from_reader(&data[..]).map_err(|e| ImageError::BadJson {
                        what: format!("image index {digest}"),
                        reason: super::error::with_causes(&e),
                    })?;
                let chosen = index.manifests().iter().find(|m| {
                    m.platform()
                        .as_ref()
                        .is_some_and(|p| format!("{}/{}", p.os(), p.architecture()) == platform)
                });
                let Some(chosen) = chosen else {
                    return Err(ImageError::NoMatchingPlatform {
                        digest,
                        platform: platform.to_string(),
                    });
                };
                let inner = self.select(blobs, chosen, platform, depth + 1)?;
                Ok(inner.map(|(m, size, _)| (m, size, Some(digest))))
            }
        }
    }
}

/// The name an index.json entry carries: a full reference in either annotation
/// (`org.opencontainers.image.ref.name` first), else a bare word in either.
fn raw_name(desc: &Descriptor) -> RawName {
    let annotations = desc.annotations().as_ref();
    let names = [REF_NAME, CONTAINERD_NAME]
        .map(|k| RawName::of(annotations.and_then(|a| a.get(k)).map(String::as_str)));
    let full = names.iter().find(|n| matches!(n, RawName::Full(_)));
    let bare = names.iter().find(|n| matches!(n, RawName::Bare(_)));
    full.or(bare).cloned().unwrap_or(RawName::Unnamed)
}

/// What a descriptor points to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Index,
    Manifest,
    Other,
}

/// Classifies a stored blob by its descriptor's media type, or by its JSON shape
/// when the media type is unknown.
pub(crate) fn kind_of(blobs: &Blobs, desc: &Descriptor) -> Result<Kind, ImageError> {
    match desc.media_type().as_ref() {
        "application/vnd.oci.image.index.v1+json"
        | "application/vnd.docker.distribution.manifest.list.v2+json" => Ok(Kind::Index),
        "application/vnd.oci.image.manifest.v1+json"
        | "application/vnd.docker.distribution.manifest.v2+json" => Ok(Kind::Manifest),
        _ => {
            let data = blobs.read_json_bytes(desc.digest().as_ref())?;
            let v: serde_json::Value = match serde_json::from_slice(&data) {
                Ok(v) => v,
                Err(_) => return Ok(Kind::Other),
            };
            Ok(if v.get("manifests").is_some() {
                Kind::Index
            } else if v.get("layers").is_some() && v.get("config").is_some() {
                Kind::Manifest
            } else {
                Kind::Other
            })
        }
    }
}

/// This host's platform in OCI terms, "linux/amd64".
pub(crate) fn host_platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    format!("linux/{arch}")
}

fn not_a_layout(path: &Path, reason: &str) -> ImageError {
    ImageError::NotALayout {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn read_limited(r: impl Read) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    r.take(MAX_INDEX).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Warns (does not fail) when `oci-layout` is absent or has an unknown version.
fn check_layout_file(dir: &Path, file: &Path) {
    match std::fs::read(file) {
        Ok(data) => {
            let version = serde_json::from_slice::<serde_json::Value>(&data)
                .ok()
                .and_then(|v| v.get("imageLayoutVersion")?.as_str().map(str::to_string));
            if version.as_deref() != Some("1.0.0") {
                tracing::warn!(layout = %dir.display(), ?version, "unexpected oci-layout version");
            }
        }
        Err(_) => tracing::warn!(layout = %dir.display(), "no oci-layout file; reading it anyway"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_platform_is_linux() {
        let p = host_platform();
        assert!(p.starts_with("linux/"), "{p}");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(p, "linux/amd64");
    }
}
