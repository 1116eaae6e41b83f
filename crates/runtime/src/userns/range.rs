//! `--userns-range START:LENGTH`: the host IDs that pods' user namespaces are mapped to.

use std::str::FromStr;

use super::UsernsError;

/// IDs per pod: a container sees 0..65535, as with the kubelet.
pub const BLOCK_SIZE: u32 = 65536;

/// A range of host IDs in whole blocks: blocks `first_block .. first_block + blocks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    pub first_block: u32,
    pub blocks: u32,
}

impl IdRange {
    /// The default: every ID from 65536 up, as the kubelet's default mapping (which
    /// leaves the IDs below 65536 to the host's own users), minus the last block, which
    /// holds (uid_t)-1, the "no ID" value of chown(2) and setresuid(2).
    pub const DEFAULT: IdRange = IdRange {
        first_block: 1,
        blocks: 65534,
    };

    /// The host ID of the start of block `index` of this range.
    pub fn base_of(&self, index: u32) -> u32 {
        (self.first_block + index) * BLOCK_SIZE
    }

    /// Whether `base` starts one of this range's blocks.
    pub fn holds(&self, base: u32) -> bool {
        base.is_multiple_of(BLOCK_SIZE)
            && base / BLOCK_SIZE >= self.first_block
            && base / BLOCK_SIZE < self.first_block + self.blocks
    }
}

impl std::fmt::Display for IdRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let start = u64::from(self.first_block) * u64::from(BLOCK_SIZE);
        let len = u64::from(self.blocks) * u64::from(BLOCK_SIZE);
        write!(f, "{start}:{len}")
    }
}

impl FromStr for IdRange {
    type Err = UsernsError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| UsernsError::BadRange {
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let (start, len) = value.trim().split_once(':').ok_or_else(|| bad("no ':'"))?;
        let start: u64 = start.parse().map_err(|_| bad("START is not a number"))?;
        let len: u64 = len.parse().map_err(|_| bad("LENGTH is not a number"))?;
        let block = u64::from(BLOCK_SIZE);
        if !start.is_multiple_of(block) || !len.is_multiple_of(block) {
            return Err(bad("START and LENGTH must be multiples of 65536"));
        }
        if start == 0 {
            return Err(bad(
                "the range must not start at 0: the host's own users live there",
            ));
        }
        if len == 0 {
            return Err(bad("LENGTH must hold at least one block of 65536"));
        }
        // The last ID, 2^32-1, is (uid_t)-1 and may never be mapped.
        if start
            .checked_add(len)
            .is_none_or(|end| end > (1u64 << 32) - block)
        {
            return Err(bad("the range must end at or below 4294901760"));
        }
        // start + len < 2^32, so both block counts are below 2^16.
        let blocks_of = |n: u64| u32::try_from(n / block).map_err(|_| bad("out of range"));
        Ok(IdRange {
            first_block: blocks_of(start)?,
            blocks: blocks_of(len)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_whole_blocks() {
        let r: IdRange = "131072:196608".parse().unwrap();
        assert_eq!(
            r,
            IdRange {
                first_block: 2,
                blocks: 3
            }
        );
        assert_eq!(r.base_of(0), 131072);
        assert_eq!(r.base_of(2), 262144);
        assert!(r.holds(262144));
        assert!(!r.holds(327680));
        assert!(!r.holds(131073));
        assert_eq!(r.to_string(), "131072:196608");
    }

    #[test]
    fn default_is_the_kubelets_without_the_last_block() {
        assert_eq!(IdRange::DEFAULT.to_string(), "65536:4294836224");
        let parsed: IdRange = "65536:4294836224".parse().unwrap();
        assert_eq!(parsed, IdRange::DEFAULT);
    }

    #[test]
    fn rejects_what_is_not_whole_blocks() {
        for bad in [
            "",
            "65536",
            "x:65536",
            "65536:y",
            "65537:65536",
            "65536:100",
            "0:65536",
            "65536:0",
            "65536:4294901760",
        ] {
            let err = bad.parse::<IdRange>().unwrap_err().to_string();
            assert!(err.contains("--userns-range"), "{bad}: {err}");
        }
    }
}
