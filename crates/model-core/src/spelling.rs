//! "Did you mean": the known name a misspelt one was most likely meant to be, for the
//! unknown fields of a manifest and of the config file.

/// The name of `known` nearest to `typed` (case ignored), if one is within a third of
/// its length in edits; the closest, then the first in order, wins. `typed` itself is
/// never suggested.
pub fn nearest<'a>(known: impl IntoIterator<Item = &'a str>, typed: &str) -> Option<&'a str> {
    let typed_lower = typed.to_lowercase();
    known
        .into_iter()
        .filter(|name| *name != typed)
        .map(|name| (edit_distance(&typed_lower, &name.to_lowercase()), name))
        .filter(|(distance, name)| *distance <= name.chars().count().div_ceil(3))
        .min_by_key(|(distance, name)| (*distance, *name))
        .map(|(_, name)| name)
}

/// Levenshtein distance (insertions, deletions, substitutions), by characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("comand", "command"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn the_closest_name_within_a_third_of_its_length() {
        let known = ["command", "args", "image", "imagePullPolicy"];
        assert_eq!(nearest(known, "comand"), Some("command"));
        assert_eq!(nearest(known, "IMAGE"), Some("image"));
        assert_eq!(nearest(known, "imagePullPolcy"), Some("imagePullPolicy"));
        assert_eq!(nearest(known, "frobnicate"), None);
        assert_eq!(nearest(known, "image"), None, "not itself");
    }
}
