//! `podhost images`: REFERENCE DIGEST SIZE LAST USED.

use chrono::{DateTime, Utc};

use super::age::human_duration;
use super::table::align;
use crate::image::ImageSummary;

/// Sizes as `1.2MB`-style decimal units, as container tools print them.
pub fn human_size(bytes: u64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1000.0 && i + 1 < units.len() {
        v /= 1000.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes}B")
    } else {
        format!("{v:.1}{}", units[i])
    }
}

pub fn render_images(images: &[ImageSummary], now: DateTime<Utc>) -> String {
    let mut rows = vec![
        ["REFERENCE", "DIGEST", "SIZE", "LAST USED"]
            .map(String::from)
            .to_vec(),
    ];
    for i in images {
        let digest: String = i.digest.chars().take(19).collect();
        let used = i
            .last_used
            .map(|t| {
                format!(
                    "{} ago",
                    human_duration((now - t).to_std().unwrap_or_default())
                )
            })
            .unwrap_or_else(|| "never".into());
        rows.push(vec![i.reference.clone(), digest, human_size(i.size), used]);
    }
    align(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(human_size(512), "512B");
        assert_eq!(human_size(1_234_567), "1.2MB");
    }
}
