//! The content-addressed image store: loads OCI image layouts and oci-archives,
//! verifies every blob against its digest, unpacks each layer once into a shared
//! snapshot (`snapshots/<chainid>/`, an overlay lower dir) and resolves image
//! references for the runtime. See [`ImageStore`].

mod blobs;
mod compress;
mod digest;
mod error;
mod fsutil;
mod layout;
mod reference;
mod refs;
mod store;
mod tarmeta;
mod unpack;

pub use digest::chain_ids;
pub use error::ImageError;
pub use reference::normalize_reference;
pub use store::{ImageStore, ImageSummary, ResolvedImage};
