//! The content-addressed image store: loads OCI image layouts and oci-archives,
//! verifies every blob against its digest, unpacks each layer once into a shared
//! snapshot (`snapshots/<chainid>/`, an overlay lower dir) and resolves image
//! references for the runtime. See [`ImageStore`].
//!
//! In the workspace (docs/architecture.md, "Crates"): uses model, disk, metrics. It may
//! not: the runtime, pods, or the network beyond its registries.

mod blob_writer;
mod blobs;
mod compress;
mod digest;
mod docker_archive;
mod error;
mod fsutil;
pub mod gc;
mod in_use;
mod layout;
mod naming;
pub mod pull;
mod reference;
mod refs;
mod store;
mod tarmeta;
mod unpack;
mod user;

pub use blob_writer::BlobWriter;
pub use digest::chain_ids;
pub use error::ImageError;
pub use gc::FsUsage;
pub use in_use::{PodImages, check_removable};
pub use reference::{is_local_only, local_only_hint, normalize_reference};
pub use store::{ImageStore, ImageSummary, ResolvedImage, UnpackedLayer, images_dir};
pub use unpack::{SkippedEntry, UnpackStats, unpack_layer};
pub use user::{ImageUser, MAX_ACCOUNT_FILE, UserError, UserRequest, resolve_user};
