//! How full the image filesystem is, and the kubelet's threshold arithmetic
//! (`image_gc_manager.go`): `usage% = 100 − available·100/capacity` (integer
//! division), `amountToFree = capacity·(100 − low)/100 − available`.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::ImageError;

/// Size and free space of a filesystem, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsUsage {
    /// Total size (`f_blocks · f_frsize`).
    pub capacity: u64,
    /// Space an unprivileged writer can still use (`f_bavail · f_frsize`), as cAdvisor
    /// reports it to the kubelet.
    pub available: u64,
}

impl FsUsage {
    /// statvfs of the filesystem holding `path`.
    pub fn of(path: &Path) -> Result<FsUsage, ImageError> {
        let st = nix::sys::statvfs::statvfs(path)
            .map_err(|e| ImageError::io("statvfs", path, e.into()))?;
        let frsize = st.fragment_size() as u64;
        Ok(FsUsage {
            capacity: (st.blocks() as u64).saturating_mul(frsize),
            available: (st.blocks_available() as u64).saturating_mul(frsize),
        })
    }

    /// Percent used, as the kubelet computes it; 0 for a zero-sized filesystem.
    pub fn used_percent(&self) -> u8 {
        if self.capacity == 0 {
            return 0;
        }
        let avail_pct =
            (u128::from(self.available.min(self.capacity)) * 100) / u128::from(self.capacity);
        // available ≤ capacity, so avail_pct ≤ 100 and the difference fits a u8.
        u8::try_from(100 - avail_pct).unwrap_or(100)
    }

    /// Bytes to free to bring usage down to `low_percent` (0 when already there).
    pub fn amount_to_free(&self, low_percent: u8) -> u64 {
        let low = u128::from(low_percent.min(100));
        let goal = u128::from(self.capacity) * (100 - low) / 100;
        podhost_model::convert::saturating_u64(goal.saturating_sub(u128::from(self.available)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_arithmetic() {
        let u = FsUsage {
            capacity: 1000,
            available: 100,
        };
        assert_eq!(u.used_percent(), 90);
        // Down to 80% used: 200 available wanted, 100 there.
        assert_eq!(u.amount_to_free(80), 100);
        // Integer division as the kubelet: 149/1000 available is 14% → 86% used.
        let u = FsUsage {
            capacity: 1000,
            available: 149,
        };
        assert_eq!(u.used_percent(), 86);
        assert_eq!(
            FsUsage {
                capacity: 1000,
                available: 500
            }
            .amount_to_free(80),
            0
        );
        assert_eq!(
            FsUsage {
                capacity: 0,
                available: 0
            }
            .used_percent(),
            0
        );
        // low 0: free everything used.
        assert_eq!(
            FsUsage {
                capacity: 1000,
                available: 300
            }
            .amount_to_free(0),
            700
        );
    }

    #[test]
    fn statvfs_of_a_real_dir() {
        let dir = tempfile::tempdir().unwrap();
        let u = FsUsage::of(dir.path()).unwrap();
        assert!(u.capacity > 0 && u.available <= u.capacity, "{u:?}");
    }
}
