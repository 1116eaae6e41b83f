//! The text kubectl's describers write: lines whose cells end in tabs, laid out as Go's
//! `text/tabwriter` (padding 2, as `kubectl describe`) lays them out. A column is
//! aligned over a block of consecutive lines that each have a tab-terminated cell in
//! it; a line without one ends the block, so that each section aligns on its own, and
//! the last cell of a line is never padded.

/// Writes indented lines as kubectl's `PrefixWriter` does (`LEVEL_0`…`LEVEL_3`: 0, 2,
/// 4 or 6 spaces).
#[derive(Default)]
pub struct Tabbed {
    text: String,
}

impl Tabbed {
    /// `line` (with its tabs and newline) at `level`.
    pub fn write(&mut self, level: usize, line: &str) {
        self.text.push_str(&"  ".repeat(level));
        self.text.push_str(line);
    }

    /// The lines laid out.
    pub fn finish(self) -> String {
        layout(&self.text, 2)
    }
}

/// Go's tabwriter with minwidth 0 and `padding`, over `text`.
pub fn layout(text: &str, padding: usize) -> String {
    let lines: Vec<Vec<&str>> = text
        .split_inclusive('\n')
        .map(|l| l.strip_suffix('\n').unwrap_or(l).split('\t').collect())
        .collect();
    let mut widths: Vec<Vec<usize>> = vec![Vec::new(); lines.len()];
    blocks(
        &lines,
        0,
        0,
        lines.len(),
        &mut Vec::new(),
        &mut widths,
        padding,
    );
    let mut out = String::with_capacity(text.len());
    for (cells, line_widths) in lines.iter().zip(&widths) {
        let last = cells.len() - 1;
        for (i, cell) in cells.iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                let width = line_widths.get(i).copied().unwrap_or(0);
                out.push_str(cell);
                out.push_str(&" ".repeat(width.saturating_sub(cell.chars().count())));
            }
        }
        out.push('\n');
    }
    if !text.ends_with('\n') {
        out.pop();
    }
    out
}

/// Sets the widths of column `column` and those right of it for lines `from..to`.
fn blocks(
    lines: &[Vec<&str>],
    column: usize,
    from: usize,
    to: usize,
    open: &mut Vec<usize>,
    widths: &mut [Vec<usize>],
    padding: usize,
) {
    let has_cell = |line: &Vec<&str>| column + 1 < line.len();
    let mut i = from;
    while i < to {
        if !has_cell(&lines[i]) {
            widths[i] = open.clone();
            i += 1;
            continue;
        }
        let start = i;
        let mut width = 0;
        while i < to && has_cell(&lines[i]) {
            width = width.max(lines[i][column].chars().count() + padding);
            i += 1;
        }
        open.push(width);
        blocks(lines, column + 1, start, i, open, widths, padding);
        open.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout of kubectl's own describe output: a column aligns over the lines
    /// that have it, a line without a tab ends the block, the last cell is not padded.
    #[test]
    fn columns_align_per_block_as_gos_tabwriter() {
        let text = "Name:\tweb\nService Account:\tdefault\nIPs:\n  IP:\t10.0.0.1\nConditions:\n  Type\tStatus\n  Initialized \tTrue \n";
        assert_eq!(
            layout(text, 2),
            "Name:             web\n\
             Service Account:  default\n\
             IPs:\n  \
             IP:  10.0.0.1\n\
             Conditions:\n  \
             Type          Status\n  \
             Initialized   True \n"
        );
    }

    #[test]
    fn a_deeper_column_aligns_over_its_own_sub_block() {
        let text = "a\tb\tc\nlonger\tb\nx\ty\tz\n";
        assert_eq!(layout(text, 1), "a      b c\nlonger b\nx      y z\n");
    }
}
