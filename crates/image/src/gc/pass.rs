//! One full image GC pass under the GC barrier: the images (grouped by manifest) and
//! their content, what must be kept, the choice, the reference removal, then the
//! deletion of everything nothing references.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use chrono::{DateTime, Utc};

use super::content::{self, ContentReader, Dirs, Item};
use super::select::{self, Budget, Candidate, Selection};
use super::{ImageGcPolicy, InUse, LOCK_WAIT, barrier};
use crate::digest::sha256_hex;
use crate::error::ImageError;
use crate::fsutil::remove_stale_temps;
use crate::reference::{digest_part, is_bare_digest};
use crate::refs::RefIndex;
use crate::{ImageStore, normalize_reference};

/// What a pass did.
pub(super) struct Done {
    pub freed: u64,
    pub deleted: Vec<String>,
}

/// Content ids, each item once.
#[derive(Default)]
struct Interner {
    ids: HashMap<Item, usize>,
    items: Vec<Item>,
}

impl Interner {
    fn id(&mut self, item: &Item) -> usize {
        if let Some(&id) = self.ids.get(item) {
            return id;
        }
        let id = self.items.len();
        self.ids.insert(item.clone(), id);
        self.items.push(item.clone());
        id
    }
}

/// The in-use set, normalized, with the digests of `name@digest` references.
fn normalized_in_use(in_use: &dyn InUse) -> HashSet<String> {
    let mut out = HashSet::new();
    for r in in_use.in_use() {
        let n = normalize_reference(&r);
        if let Some(d) = digest_part(&n) {
            out.insert(d.to_string());
        }
        out.insert(n);
    }
    out
}

/// The images of an index, grouped by manifest, with their content interned.
fn candidates(
    index: &RefIndex,
    in_use: &HashSet<String>,
    reader: &mut ContentReader<'_>,
    interner: &mut Interner,
) -> Result<Vec<Candidate>, ImageError> {
    let mut by_manifest: BTreeMap<&str, Candidate> = BTreeMap::new();
    for (reference, entry) in &index.images {
        let used = in_use.contains(reference)
            || in_use.contains(&entry.manifest)
            || entry.index.as_ref().is_some_and(|i| in_use.contains(i));
        let first = entry.first_detected();
        let c = match by_manifest.get_mut(entry.manifest.as_str()) {
            Some(c) => c,
            None => {
                let items = reader.items(&entry.manifest)?;
                let items = items.iter().map(|i| interner.id(i)).collect();
                by_manifest.entry(&entry.manifest).or_insert(Candidate {
                    manifest: entry.manifest.clone(),
                    refs: Vec::new(),
                    first_detected: first,
                    last_used: None,
                    pinned: false,
                    in_use: false,
                    items,
                })
            }
        };
        c.refs.push(reference.clone());
        c.first_detected = c.first_detected.min(first);
        c.last_used = c.last_used.max(entry.last_used);
        c.pinned |= entry.pinned;
        c.in_use |= used;
        if let Some(idx) = entry.index.as_deref().and_then(|d| sha256_hex(d).ok()) {
            c.items.push(interner.id(&Item::Blob(idx.to_string())));
        }
    }
    let mut out: Vec<Candidate> = by_manifest.into_values().collect();
    for c in &mut out {
        c.items.sort_unstable();
        c.items.dedup();
    }
    Ok(out)
}

/// Content kept whatever the references say: what in-use manifests that no reference
/// names still use, and mounted snapshots.
fn roots(
    in_use: &HashSet<String>,
    named: &HashSet<&str>,
    reader: &mut ContentReader<'_>,
    interner: &mut Interner,
) -> Result<Vec<usize>, ImageError> {
    let mut out = Vec::new();
    for d in in_use
        .iter()
        .filter(|d| is_bare_digest(d) && !named.contains(d.as_str()))
    {
        for item in reader.items(d)?.iter() {
            out.push(interner.id(item));
        }
    }
    for hex in content::mounted_snapshots() {
        out.push(interner.id(&Item::Snapshot(hex)));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Under the GC barrier: chooses images (if `choose` gives a policy and a target),
/// removes their references, then deletes all content nothing references. `None` if
/// the barrier could not be taken within [`LOCK_WAIT`].
pub(super) fn full_pass(
    store: &ImageStore,
    choose: Option<(&ImageGcPolicy, u64)>,
    in_use: &dyn InUse,
    now: DateTime<Utc>,
) -> Result<Option<Done>, ImageError> {
    let root = store.root_dir();
    let Some(_gc) = barrier::exclusive(root, LOCK_WAIT)? else {
        return Ok(None);
    };
    sweep_temps(root);
    let dirs = Dirs::new(root);
    let in_use = normalized_in_use(in_use);
    let index = store.ref_file().read()?;
    let mut reader = ContentReader::new(&dirs);
    let mut interner = Interner::default();
    let cands = candidates(&index, &in_use, &mut reader, &mut interner)?;
    let named: HashSet<&str> = index
        .images
        .values()
        .flat_map(|e| std::iter::once(e.manifest.as_str()).chain(e.index.as_deref()))
        .collect();
    let roots = roots(&in_use, &named, &mut reader, &mut interner)?;
    let disk: Vec<usize> = content::on_disk(&dirs)?
        .iter()
        .map(|i| interner.id(i))
        .collect();

    let mut sizes: Vec<Option<u64>> = Vec::new();
    let items = interner.items.clone();
    let mut size = |id: usize| -> u64 {
        if sizes.len() <= id {
            sizes.resize(items.len().max(id + 1), None);
        }
        *sizes[id].get_or_insert_with(|| content::disk_usage(&dirs.path(&items[id])))
    };

    let mut referenced = vec![false; interner.items.len()];
    for &i in cands.iter().flat_map(|c| &c.items).chain(&roots) {
        referenced[i] = true;
    }
    let garbage: u64 = disk
        .iter()
        .filter(|&&i| !referenced[i])
        .map(|&i| size(i))
        .sum();

    let selection = match choose {
        Some((policy, target)) => select::select(
            &cands,
            &roots,
            interner.items.len(),
            Budget {
                already_freed: garbage,
                target,
            },
            policy,
            now,
            &mut size,
        ),
        None => Selection::default(),
    };
    if !selection.victims.is_empty() {
        tracing::info!(
            images = selection.victims.len(),
            planned_bytes = selection.planned_bytes,
            "image GC: deleting images"
        );
    }
    let deleted = remove_refs(store, &index, &cands, &selection)?;

    // What the index names now (only removals can have happened since: adding a
    // reference needs the barrier we hold).
    let index = store.ref_file().read()?;
    let mut keep = vec![false; interner.items.len()];
    for &i in &roots {
        keep[i] = true;
    }
    for entry in index.images.values() {
        for item in reader.items(&entry.manifest)?.iter() {
            if let Some(&i) = interner.ids.get(item) {
                keep[i] = true;
            }
        }
        if let Some(idx) = entry.index.as_deref().and_then(|d| sha256_hex(d).ok())
            && let Some(&i) = interner.ids.get(&Item::Blob(idx.to_string()))
        {
            keep[i] = true;
        }
    }
    let doomed: Vec<Item> = disk
        .iter()
        .filter(|&&i| !keep[i])
        .map(|&i| interner.items[i].clone())
        .collect();
    let ids = interner.ids;
    let freed = content::delete(&dirs, &doomed, &mut |item| {
        ids.get(item).map_or(0, |&i| size(i))
    });
    if !doomed.is_empty() {
        tracing::info!(
            items = doomed.len(),
            freed_bytes = freed,
            "image GC: deleted unreferenced content"
        );
    }
    Ok(Some(Done { freed, deleted }))
}

/// Removes the victims' references in one index write, each only if its entry is
/// unchanged since GC read it (not touched, re-pointed or pinned meanwhile).
fn remove_refs(
    store: &ImageStore,
    seen: &RefIndex,
    cands: &[Candidate],
    selection: &Selection,
) -> Result<Vec<String>, ImageError> {
    if selection.victims.is_empty() {
        return Ok(Vec::new());
    }
    let refs: Vec<&String> = selection
        .victims
        .iter()
        .flat_map(|(i, _)| &cands[*i].refs)
        .collect();
    let mut deleted = store.ref_file().update(|index| {
        let mut removed = Vec::new();
        for r in refs {
            if index
                .images
                .get(r)
                .is_some_and(|now| Some(now) == seen.images.get(r))
            {
                index.images.remove(r);
                removed.push(r.clone());
            } else {
                tracing::info!(reference = %r, "image GC: changed meanwhile; kept");
            }
        }
        let changed = !removed.is_empty();
        Ok((removed, changed))
    })?;
    for r in &deleted {
        tracing::info!(reference = %r, "image GC: deleted image");
    }
    deleted.sort();
    Ok(deleted)
}

/// Removes temps of dead writers (and trash of an interrupted GC).
fn sweep_temps(root: &Path) {
    for dir in [root.join("images").join("tmp"), root.join("snapshots")] {
        match remove_stale_temps(&dir) {
            Ok(removed) => {
                for p in removed {
                    tracing::info!(path = %p.display(), "image GC: removed leftover temp");
                }
            }
            Err(e) => tracing::warn!(error = %e, "image GC: cannot sweep temps"),
        }
    }
}
