//! The files of one container log, in the order their lines were written: the rotated
//! files oldest first (plain or gzip), then the current file.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use flate2::read::MultiGzDecoder;

use super::LogError;
use super::rotate::{COMPRESSED_SUFFIX, RotationKey, rotated_files};

/// One file of a container log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPart {
    /// The file as it was listed.
    pub path: PathBuf,
    /// gzip-compressed.
    pub compressed: bool,
    /// Its place among rotations; `None` for the current file.
    pub key: Option<RotationKey>,
}

impl LogPart {
    /// When the file was rotated (its lines are all older), to the second.
    pub fn rotated_at(&self) -> Option<DateTime<Utc>> {
        self.key.as_ref().and_then(RotationKey::time)
    }
}

/// The rotated files of `log` (oldest first) followed by `log` itself.
pub fn log_parts(log: &Path) -> Result<Vec<LogPart>, LogError> {
    let rotated = rotated_files(log).map_err(|source| LogError::Read {
        path: log.parent().unwrap_or(log).to_path_buf(),
        source,
    })?;
    let mut parts: Vec<LogPart> = rotated
        .into_iter()
        .map(|f| LogPart {
            path: f.path,
            compressed: f.compressed,
            key: Some(f.key),
        })
        .collect();
    parts.push(LogPart {
        path: log.to_path_buf(),
        compressed: false,
        key: None,
    });
    Ok(parts)
}

/// An open log part.
pub enum PartReader {
    Plain(File),
    Gzip(Box<BufReader<MultiGzDecoder<File>>>),
}

impl std::fmt::Debug for PartReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PartReader::Plain(_) => "PartReader::Plain",
            PartReader::Gzip(_) => "PartReader::Gzip",
        })
    }
}

impl PartReader {
    /// Positions a plain file at `offset` (compressed parts are always read whole).
    pub fn starting_at(mut self, offset: u64) -> std::io::Result<Self> {
        if let PartReader::Plain(f) = &mut self
            && offset > 0
        {
            std::io::Seek::seek(f, std::io::SeekFrom::Start(offset))?;
        }
        Ok(self)
    }

    /// A buffered reader of the part's CRI lines.
    pub fn into_buf_read(self) -> Box<dyn BufRead + Send> {
        match self {
            PartReader::Plain(f) => Box::new(BufReader::with_capacity(256 * 1024, f)),
            PartReader::Gzip(r) => r,
        }
    }
}

/// Opens a part. A rotated plain file that was compressed since it was listed is opened
/// as `.gz`; a rotated file that is gone (removed as the oldest) is `Ok(None)`.
pub fn open_part(part: &LogPart) -> Result<Option<PartReader>, LogError> {
    let open_err = |path: &Path, source| LogError::Open {
        path: path.to_path_buf(),
        source,
    };
    let gzip = |f: File| PartReader::Gzip(Box::new(BufReader::new(MultiGzDecoder::new(f))));
    let not_found = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    match File::open(&part.path) {
        Ok(f) if part.compressed => Ok(Some(gzip(f))),
        Ok(f) => Ok(Some(PartReader::Plain(f))),
        Err(e) if not_found(&e) && part.key.is_some() && !part.compressed => {
            let mut gz = part.path.as_os_str().to_os_string();
            gz.push(COMPRESSED_SUFFIX);
            let gz = PathBuf::from(gz);
            match File::open(&gz) {
                Ok(f) => Ok(Some(gzip(f))),
                Err(e) if not_found(&e) => Ok(None),
                Err(e) => Err(open_err(&gz, e)),
            }
        }
        Err(e) if not_found(&e) && part.key.is_some() => Ok(None),
        Err(e) => Err(open_err(&part.path, e)),
    }
}
