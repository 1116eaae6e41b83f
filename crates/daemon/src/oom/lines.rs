//! Splits a byte stream into lines for the watcher's line mode (files and FIFOs that
//! hold one kmsg record per line), with a bound on the length of a line.

/// Longer lines are dropped whole (a kmsg record is at most 8 KiB escaped).
pub(super) const MAX_LINE: usize = 64 * 1024;

/// Carries an unfinished line from one chunk to the next.
#[derive(Debug, Default)]
pub(super) struct LineSplitter {
    partial: Vec<u8>,
    /// The current line grew past [`MAX_LINE`]; skip it up to its newline.
    overflow: bool,
}

impl LineSplitter {
    /// Feeds a chunk; calls `line` for every complete line (without its `\n`).
    pub(super) fn push(&mut self, chunk: &[u8], mut line: impl FnMut(&[u8])) {
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            let complete = piece.last() == Some(&b'\n');
            let body = if complete {
                &piece[..piece.len() - 1]
            } else {
                piece
            };
            if !self.overflow {
                if self.partial.len() + body.len() > MAX_LINE {
                    self.overflow = true;
                    self.partial = Vec::new();
                } else {
                    self.partial.extend_from_slice(body);
                }
            }
            if complete {
                if !self.overflow {
                    line(&self.partial);
                }
                self.partial.clear();
                self.overflow = false;
            }
        }
    }

    /// End of stream: the last line may lack its newline.
    pub(super) fn finish(&mut self, mut line: impl FnMut(&[u8])) {
        if !self.overflow && !self.partial.is_empty() {
            line(&self.partial);
        }
        self.partial = Vec::new();
        self.overflow = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<String> {
        let mut s = LineSplitter::default();
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, |l| out.push(String::from_utf8_lossy(l).into_owned()));
        }
        s.finish(|l| out.push(String::from_utf8_lossy(l).into_owned()));
        out
    }

    #[test]
    fn lines_across_chunks() {
        assert_eq!(split(&[b"a\nb", b"c\n\nd"]), vec!["a", "bc", "", "d"]);
        assert_eq!(split(&[b"", b"\n"]), vec![""]);
    }

    #[test]
    fn overlong_lines_are_dropped_whole() {
        let long = vec![b'x'; MAX_LINE + 1];
        assert_eq!(split(&[b"a\n", &long, b"tail\nb\n"]), vec!["a", "b"]);
        assert_eq!(split(&[&long]), Vec::<String>::new());
    }
}
