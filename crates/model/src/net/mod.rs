//! Pure parts of the built-in pod network: CIDRs, the IPAM allocation choice and the
//! nftables ruleset text. No I/O; `network::bridge` applies them.

pub mod cidr;
pub mod ipam;
pub mod nft;

pub use cidr::{Cidr, CidrError};
