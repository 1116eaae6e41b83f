//! docker-archive: what `docker save` and `skopeo copy ... docker-archive:` write.
//!
//! ```text
//! manifest.json   [{"Config": "<hex>.json", "RepoTags": ["busybox:latest"],
//!                   "Layers": ["<id>/layer.tar", ...]}]
//! repositories    {"busybox": {"latest": "<top layer id>"}}   (older tools)
//! <hex>.json      the image config
//! <id>/layer.tar  a layer, usually uncompressed, possibly a symlink to another
//! ```
//!
//! [`import`] turns one into what the rest of the store reads from any source:
//! content-addressed blobs (config digest = sha256 of the config file, layers
//! stored as they are, their digests computed), an OCI image manifest per image
//! (synthesized, deterministic), and an `index.json` naming each manifest by its
//! normalized RepoTags, with the config's platform. An uncompressed layer must
//! hash to its diff_id from the config; a compressed one is checked against it
//! when it is unpacked.
//!
//! The archive is read twice: once for `manifest.json` (seeking over the layers
//! when the file is not compressed), once to store the members it lists.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek};
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::blobs::Blobs;
use super::compress::{Compression, decompressed};
use super::digest::sha256_of;
use super::error::{ImageError, IoContext};
use super::reference::normalize_reference;

/// Largest manifest.json, repositories or config file read.
const MAX_JSON: u64 = 16 << 20;
const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG_TYPE: &str = "application/vnd.oci.image.config.v1+json";
const INDEX_TYPE: &str = "application/vnd.oci.image.index.v1+json";
const REF_NAME: &str = "org.opencontainers.image.ref.name";
/// Symlinked members followed at most this deep.
const MAX_ALIASES: usize = 8;

/// One image of manifest.json.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Entry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

/// A member stored in the blob store.
#[derive(Debug, Clone)]
struct Stored {
    digest: String,
    size: u64,
    compression: Compression,
}

/// Stores the images of docker-archive `path` in `blobs` and returns an OCI
/// `index.json` (bytes) that names their synthesized manifests.
pub(crate) fn import(path: &Path, blobs: &Blobs) -> Result<Vec<u8>, ImageError> {
    let (manifest_json, repositories) = read_manifest(path)?;
    let entries: Vec<Entry> =
        serde_json::from_slice(&manifest_json).map_err(|e| ImageError::BadJson {
            what: format!("{}:manifest.json", path.display()),
            reason: e.to_string(),
        })?;
    if entries.is_empty() {
        return Err(bad(path, "manifest.json lists no image"));
    }
    let mut configs = Vec::new();
    let mut layers = Vec::new();
    for e in &entries {
        configs.push(member_key(&e.config).ok_or_else(|| bad_member(path, &e.config))?);
        for l in &e.layers {
            layers.push(member_key(l).ok_or_else(|| bad_member(path, l))?);
        }
    }
    let stored = store_members(path, blobs, &configs, &layers)?;
    let mut index = Vec::new();
    for e in &entries {
        let refs = references(e, repositories.as_deref());
        let (desc, platform) = synthesize(path, blobs, e, &stored)?;
        if refs.is_empty() {
            // Unnamed: loaded only when `load --name` names it.
            let mut d = desc;
            d["platform"] = platform;
            index.push(d);
            continue;
        }
        for r in refs {
            let mut d = desc.clone();
            d["platform"] = platform.clone();
            d["annotations"] = json!({ REF_NAME: r });
            index.push(d);
        }
    }
    tracing::info!(archive = %path.display(), images = entries.len(), names = index.len(),
        "read docker-archive");
    let index = json!({"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": index});
    Ok(index.to_string().into_bytes())
}

/// `manifest.json` and `repositories` (if any) of the archive.
fn read_manifest(path: &Path) -> Result<(Vec<u8>, Option<Vec<u8>>), ImageError> {
    let (mut manifest, mut repositories) = (None, None);
    for_each_member(path, true, |m| {
        if !m.kind.is_file() {
            return Ok(());
        }
        match m.key {
            "manifest.json" => manifest = Some(read_small(m.data, path, m.key)?),
            "repositories" => repositories = Some(read_small(m.data, path, m.key)?),
            _ => {}
        }
        Ok(())
    })?;
    let manifest = manifest.ok_or_else(|| bad(path, "no manifest.json in the archive"))?;
    Ok((manifest, repositories))
}

/// Stores the config and layer members; resolves members that are symlinks or
/// hardlinks to others. Returns member key → stored blob.
fn store_members(
    path: &Path,
    blobs: &Blobs,
    configs: &[String],
    layers: &[String],
) -> Result<HashMap<String, Stored>, ImageError> {
    let mut stored: HashMap<String, Stored> = HashMap::new();
    let mut aliases: HashMap<String, String> = HashMap::new();
    let wanted = |k: &str| configs.iter().chain(layers).any(|w| w == k);
    for_each_member(path, false, |m| {
        let (key, kind) = (m.key, m.kind);
        if kind.is_symlink() || kind.is_hard_link() {
            let target = String::from_utf8_lossy(&m.link.unwrap_or_default()).into_owned();
            let joined = match kind.is_symlink() {
                true => format!("{}/{target}", key.rsplit_once('/').map_or("", |(d, _)| d)),
                false => target,
            };
            if let Some(t) = member_key(&joined) {
                aliases.insert(key.to_string(), t);
            }
            return Ok(());
        }
        if !kind.is_file() || !wanted(key) || stored.contains_key(key) {
            return Ok(());
        }
        let what = format!("{}:{key}", path.display());
        let s = if configs.iter().any(|c| c == key) {
            let data = read_small(m.data, path, key)?;
            let digest = sha256_of(&data);
            blobs.ingest(&data[..], &digest, Some(data.len() as u64), &what)?;
            Stored {
                digest,
                size: data.len() as u64,
                compression: Compression::None,
            }
        } else {
            let mut buffered = BufReader::with_capacity(256 * 1024, m.data);
            let head = buffered.fill_buf().ctx("read", Path::new(&what))?;
            let compression = Compression::detect(head);
            let (digest, size) = blobs.ingest_computed(buffered, &what)?;
            Stored {
                digest,
                size,
                compression,
            }
        };
        stored.insert(key.to_string(), s);
        Ok(())
    })?;
    for key in configs.iter().chain(layers) {
        let mut k = key.clone();
        for _ in 0..MAX_ALIASES {
            match (stored.contains_key(&k), aliases.get(&k)) {
                (false, Some(next)) => k = next.clone(),
                _ => break,
            }
        }
        let s = stored.get(&k).cloned().ok_or_else(|| {
            bad(
                path,
                &format!("\"{key}\" listed in manifest.json is missing"),
            )
        })?;
        stored.insert(key.clone(), s);
    }
    Ok(stored)
}

/// Builds and stores the OCI manifest of one image. Returns its descriptor and
/// the config's platform.
fn synthesize(
    path: &Path,
    blobs: &Blobs,
    e: &Entry,
    stored: &HashMap<String, Stored>,
) -> Result<(Value, Value), ImageError> {
    let get = |m: &str| member_key(m).and_then(|k| stored.get(&k));
    let config = get(&e.config).ok_or_else(|| bad_member(path, &e.config))?;
    let config_json: Value = serde_json::from_slice(&blobs.read_json_bytes(&config.digest)?)
        .map_err(|err| ImageError::BadJson {
            what: format!("{}:{}", path.display(), e.config),
            reason: err.to_string(),
        })?;
    let diff_ids: Vec<&str> = config_json["rootfs"]["diff_ids"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if diff_ids.len() != e.layers.len() {
        return Err(ImageError::BadJson {
            what: format!("{}:{}", path.display(), e.config),
            reason: format!(
                "the config lists {} diff_ids but manifest.json {} layers",
                diff_ids.len(),
                e.layers.len()
            ),
        });
    }
    let mut layers = Vec::new();
    for (member, diff_id) in e.layers.iter().zip(diff_ids) {
        let l = get(member).ok_or_else(|| bad_member(path, member))?;
        if l.compression == Compression::None && l.digest != diff_id {
            return Err(ImageError::DigestMismatch {
                what: format!("{}:{member}", path.display()),
                expected: diff_id.to_string(),
                actual: l.digest.clone(),
            });
        }
        let media_type = match l.compression {
            Compression::None => "application/vnd.oci.image.layer.v1.tar",
            Compression::Gzip => "application/vnd.oci.image.layer.v1.tar+gzip",
            Compression::Zstd => "application/vnd.oci.image.layer.v1.tar+zstd",
        };
        layers.push(json!({"mediaType": media_type, "digest": l.digest, "size": l.size}));
    }
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, "digest": config.digest, "size": config.size},
        "layers": layers,
    });
    let bytes = manifest.to_string().into_bytes();
    let digest = sha256_of(&bytes);
    let what = format!("{}: manifest synthesized for {}", path.display(), e.config);
    blobs.ingest(&bytes[..], &digest, Some(bytes.len() as u64), &what)?;
    let platform = json!({
        "os": config_json["os"].as_str().unwrap_or("linux"),
        "architecture": config_json["architecture"].as_str().unwrap_or_default(),
    });
    let desc = json!({"mediaType": MANIFEST_TYPE, "digest": digest, "size": bytes.len()});
    Ok((desc, platform))
}

/// The normalized names of an image: its RepoTags or, for archives of older
/// tools without them, the `repositories` entries naming its top layer.
fn references(e: &Entry, repositories: Option<&[u8]>) -> Vec<String> {
    let mut out: Vec<String> = e
        .repo_tags
        .iter()
        .flatten()
        .filter(|t| !t.trim().is_empty())
        .map(|t| normalize_reference(t))
        .collect();
    if out.is_empty() {
        let top = e.layers.last().and_then(|l| member_key(l));
        let top_id = top
            .as_deref()
            .and_then(|k| k.split_once('/'))
            .map(|(id, _)| id);
        let repos: BTreeMap<String, BTreeMap<String, String>> = repositories
            .and_then(|r| serde_json::from_slice(r).ok())
            .unwrap_or_default();
        for (repo, tags) in repos {
            for (tag, id) in tags {
                if Some(id.as_str()) == top_id {
                    out.push(normalize_reference(&format!("{repo}:{tag}")));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// One member of the archive, as [`for_each_member`] shows it.
struct Member<'a> {
    /// The normalized name (`a/b`, no `./`).
    key: &'a str,
    kind: tar::EntryType,
    /// Target of a symlink or hardlink.
    link: Option<Vec<u8>>,
    data: &'a mut dyn Read,
}

/// Calls `f` with every member of the archive (plain or gzipped). With `seek`,
/// an uncompressed archive is read with seeks over the data `f` leaves unread.
fn for_each_member(
    path: &Path,
    seek: bool,
    mut f: impl FnMut(Member<'_>) -> Result<(), ImageError>,
) -> Result<(), ImageError> {
    let mut file = File::open(path).ctx("open", path)?;
    let mut magic = [0u8; 4];
    let n = file.read(&mut magic).ctx("read", path)?;
    file.rewind().ctx("read", path)?;
    if seek && Compression::detect(&magic[..n]) == Compression::None {
        let mut archive = tar::Archive::new(file);
        let entries = archive.entries_with_seek().map_err(|e| not_tar(path, e))?;
        return visit(path, entries, &mut f);
    }
    let (_, stream) = decompressed(file).ctx("read", path)?;
    let mut archive = tar::Archive::new(stream);
    let entries = archive.entries().map_err(|e| not_tar(path, e))?;
    visit(path, entries, &mut f)
}

fn visit<R: Read>(
    path: &Path,
    entries: tar::Entries<'_, R>,
    f: &mut dyn FnMut(Member<'_>) -> Result<(), ImageError>,
) -> Result<(), ImageError> {
    for entry in entries {
        let mut entry = entry.map_err(|e| not_tar(path, e))?;
        let Some(key) = member_key(&String::from_utf8_lossy(&entry.path_bytes())) else {
            continue;
        };
        let kind = entry.header().entry_type();
        let link = entry.link_name_bytes().map(|l| l.into_owned());
        f(Member {
            key: &key,
            kind,
            link,
            data: &mut entry,
        })?;
    }
    Ok(())
}

/// An archive member's name as `a/b` (no `.` or empty parts, `..` applied);
/// `None` if it climbs above the archive root or is empty.
fn member_key(name: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for p in name.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Reads a small member whole (at most [`MAX_JSON`] bytes).
fn read_small(data: &mut dyn Read, path: &Path, key: &str) -> Result<Vec<u8>, ImageError> {
    let mut buf = Vec::new();
    data.take(MAX_JSON + 1)
        .read_to_end(&mut buf)
        .ctx("read", path)?;
    if buf.len() as u64 > MAX_JSON {
        return Err(bad(path, &format!("{key} is larger than {MAX_JSON} bytes")));
    }
    Ok(buf)
}

fn not_tar(path: &Path, e: std::io::Error) -> ImageError {
    bad(path, &format!("not a tar archive ({e})"))
}

fn bad_member(path: &Path, member: &str) -> ImageError {
    bad(
        path,
        &format!("manifest.json names an invalid member \"{member}\""),
    )
}

fn bad(path: &Path, reason: &str) -> ImageError {
    ImageError::NotALayout {
        path: path.to_path_buf(),
        reason: format!("docker-archive: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_keys() {
        assert_eq!(member_key("./a/b").as_deref(), Some("a/b"));
        assert_eq!(member_key("x/../y.tar").as_deref(), Some("y.tar"));
        assert_eq!(member_key("id/../../y"), None);
        assert_eq!(member_key("./"), None);
    }

    #[test]
    fn references_from_repo_tags_or_repositories() {
        let e: Entry = serde_json::from_str(
            r#"{"Config":"c.json","RepoTags":["busybox:latest","localhost/x:1"],"Layers":[]}"#,
        )
        .unwrap();
        assert_eq!(
            references(&e, None),
            vec!["docker.io/library/busybox:latest", "localhost/x:1"]
        );
        let e: Entry = serde_json::from_str(
            r#"{"Config":"c.json","RepoTags":null,"Layers":["top/layer.tar"]}"#,
        )
        .unwrap();
        let repos = br#"{"foo/bar":{"v1":"top","v0":"other"}}"#;
        assert_eq!(references(&e, Some(repos)), vec!["docker.io/foo/bar:v1"]);
        assert!(references(&e, None).is_empty());
    }
}
