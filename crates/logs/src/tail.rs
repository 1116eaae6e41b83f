//! `--tail N` without reading the whole log: plain files are read backwards in blocks
//! from their end, so the cost depends on N and the line length, not on the file size;
//! only as many older files as N needs are opened (a compressed one is read whole,
//! which is bounded by the rotation size).

use std::fs::File;
use std::io::BufRead;
use std::os::unix::fs::FileExt;

use super::files::{LogPart, PartReader, open_part};
use super::reader::parse_parts;
use super::{LogError, Stream};

/// Size of one backward read.
const BLOCK: u64 = 64 * 1024;

/// Where to start reading one part.
#[derive(Debug)]
pub(super) struct Segment {
    pub part: LogPart,
    pub reader: PartReader,
    /// Byte offset in a plain file (0 for compressed ones).
    pub start: u64,
}

/// Opens the parts needed for the last `tail` messages (all of them for `None`),
/// oldest first, each with the offset to read it from. Parts that vanished meanwhile
/// are left out.
pub(super) fn plan(
    parts: Vec<LogPart>,
    tail: Option<usize>,
    stream: Option<Stream>,
) -> Result<Vec<Segment>, LogError> {
    let Some(mut need) = tail else {
        let mut all = Vec::new();
        for part in parts {
            if let Some(reader) = open_part(&part)? {
                all.push(Segment {
                    part,
                    reader,
                    start: 0,
                });
            }
        }
        return Ok(all);
    };
    let mut chosen = Vec::new();
    for part in parts.into_iter().rev() {
        if need == 0 {
            break;
        }
        let Some(reader) = open_part(&part)? else {
            continue;
        };
        let read_err = |source| LogError::Read {
            path: part.path.clone(),
            source,
        };
        let (start, found) = match &reader {
            PartReader::Plain(f) => scan_back(f, need, stream).map_err(read_err)?,
            PartReader::Gzip(_) => {
                let found = count_messages(&part, stream)?;
                (0, found)
            }
        };
        need = need.saturating_sub(found);
        chosen.push(Segment {
            part,
            reader,
            start,
        });
    }
    chosen.reverse();
    Ok(chosen)
}

/// Whether a CRI line ends a message of the wanted stream (an `F` line), and whether
/// it is a `P` chunk (of any stream).
fn classify(line: &[u8], stream: Option<Stream>) -> (bool, bool) {
    match parse_parts(line) {
        Ok(l) => (
            !l.partial && stream.is_none_or(|s| s == l.stream),
            l.partial,
        ),
        Err(_) => (false, false),
    }
}

/// Counts the messages of a compressed part by reading it through.
fn count_messages(part: &LogPart, stream: Option<Stream>) -> Result<usize, LogError> {
    let Some(reader) = open_part(part)? else {
        return Ok(0);
    };
    let mut r = reader.into_buf_read();
    let mut line = Vec::new();
    let mut n = 0;
    loop {
        line.clear();
        let got = r
            .read_until(b'\n', &mut line)
            .map_err(|source| LogError::Read {
                path: part.path.clone(),
                source,
            })?;
        if got == 0 {
            return Ok(n);
        }
        if classify(&line, stream).0 {
            n += 1;
        }
    }
}

/// Finds the offset from which the plain file holds its last `want` messages (with
/// the `P` chunks that lead into the first of them), reading backwards. Returns the
/// offset and how many messages were found (fewer than `want` when the file starts
/// first; the offset is then 0).
pub(super) fn scan_back(
    file: &File,
    want: usize,
    stream: Option<Stream>,
) -> std::io::Result<(u64, usize)> {
    let len = file.metadata()?.len();
    let mut lines = BackLines::new(file, len);
    if want == 0 {
        // Nothing old: start after the last complete line.
        let end = lines.prev()?.map_or(0, |(start, l)| start + l.len() as u64);
        return Ok((end, 0));
    }
    let mut found = 0;
    let mut offset = len;
    let mut after_enough = false;
    while let Some((start, line)) = lines.prev()? {
        let (ends_message, partial) = classify(&line, stream);
        if after_enough {
            // Keep the chunks of the oldest wanted message that precede it.
            if !partial {
                return Ok((offset, found));
            }
        } else if ends_message {
            found += 1;
            after_enough = found == want;
        }
        offset = start;
    }
    Ok((0, found))
}

/// Complete lines of a file, last first.
struct BackLines<'a> {
    file: &'a File,
    /// File offset of `data[0]`.
    pos: u64,
    /// Bytes `[pos, end)` not yet returned; ends right after a newline (or is empty).
    data: Vec<u8>,
    trimmed: bool,
}

impl<'a> BackLines<'a> {
    fn new(file: &'a File, len: u64) -> Self {
        BackLines {
            file,
            pos: len,
            data: Vec::new(),
            trimmed: false,
        }
    }

    /// Reads the block before `pos` in front of `data`. `false` at the file's start.
    fn read_block(&mut self) -> std::io::Result<bool> {
        if self.pos == 0 {
            return Ok(false);
        }
        let start = self.pos.saturating_sub(BLOCK);
        // At most BLOCK bytes.
        let mut block = vec![0u8; podhost_model_core::convert::usize_saturating(self.pos - start)];
        self.file.read_exact_at(&mut block, start)?;
        block.extend_from_slice(&self.data);
        self.data = block;
        self.pos = start;
        Ok(true)
    }

    /// The previous complete line and its start offset.
    fn prev(&mut self) -> std::io::Result<Option<(u64, Vec<u8>)>> {
        if !self.trimmed {
            // A trailing fragment without a newline is a write in progress: not read.
            loop {
                if let Some(i) = self.data.iter().rposition(|&b| b == b'\n') {
                    self.data.truncate(i + 1);
                    break;
                }
                self.data.clear();
                if !self.read_block()? {
                    return Ok(None);
                }
            }
            self.trimmed = true;
        }
        if self.data.is_empty() && !self.read_block()? {
            return Ok(None);
        }
        loop {
            let body = &self.data[..self.data.len() - 1];
            if let Some(i) = body.iter().rposition(|&b| b == b'\n') {
                let line = self.data.split_off(i + 1);
                return Ok(Some((self.pos + i as u64 + 1, line)));
            }
            if !self.read_block()? {
                let line = std::mem::take(&mut self.data);
                return Ok(Some((0, line)));
            }
        }
    }
}
