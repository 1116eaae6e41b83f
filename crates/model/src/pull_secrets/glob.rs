//! Shell patterns of a registry host's labels, as Go's `path/filepath.Match` (which the
//! kubelet's `URLsMatch` applies to each dot-separated label): `*` any run of
//! characters, `?` one character, `[abc]`, `[a-z]`, `[^a-z]` a class, `\c` the
//! character `c`. A malformed pattern matches nothing (Go reports ErrBadPattern, and the
//! kubelet takes that as no match).

/// Whether `text` matches `pattern` (see the module documentation).
pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    match_from(&p, &t).unwrap_or(false)
}

/// `None`: the pattern is malformed.
fn match_from(p: &[char], t: &[char]) -> Option<bool> {
    let Some((&first, rest)) = p.split_first() else {
        return Some(t.is_empty());
    };
    match first {
        '*' => {
            // Every split of `t`; a malformed rest is malformed whatever the split.
            let mut matched = false;
            for i in 0..=t.len() {
                if match_from(rest, &t[i..])? {
                    matched = true;
                    break;
                }
            }
            Some(matched)
        }
        '?' => match t.split_first() {
            Some((_, t_rest)) => match_from(rest, t_rest),
            None => check(rest).map(|()| false),
        },
        '[' => {
            let (class_matches, after) = class(rest, t.first().copied())?;
            match t.split_first() {
                Some((_, t_rest)) if class_matches => match_from(after, t_rest),
                _ => check(after).map(|()| false),
            }
        }
        '\\' => {
            let (&escaped, rest) = rest.split_first()?;
            match t.split_first() {
                Some((&c, t_rest)) if c == escaped => match_from(rest, t_rest),
                _ => check(rest).map(|()| false),
            }
        }
        c => match t.split_first() {
            Some((&tc, t_rest)) if tc == c => match_from(rest, t_rest),
            _ => check(rest).map(|()| false),
        },
    }
}

/// Checks the rest of a pattern for malformation only (Go checks the whole pattern
/// even when an earlier part already failed to match).
fn check(p: &[char]) -> Option<()> {
    let mut rest = p;
    while let Some((&c, after)) = rest.split_first() {
        rest = match c {
            '[' => class(after, None)?.1,
            '\\' => after.split_first()?.1,
            _ => after,
        };
    }
    Some(())
}

/// Reads a class after its `[`: whether `c` is in it (false for `None`) and the pattern
/// after its `]`; `None` when it is malformed (unclosed, empty, a bad range).
fn class(p: &[char], c: Option<char>) -> Option<(bool, &[char])> {
    let (negated, mut rest) = match p.split_first() {
        Some(('^', after)) => (true, after),
        _ => (false, p),
    };
    let mut found = false;
    let mut ranges = 0;
    loop {
        if let Some((']', after)) = rest.split_first()
            && ranges > 0
        {
            let hit = c.is_some() && (found != negated);
            return Some((hit, after));
        }
        let (lo, after) = class_char(rest)?;
        rest = after;
        let mut hi = lo;
        if let Some(('-', after)) = rest.split_first() {
            let (h, after) = class_char(after)?;
            hi = h;
            rest = after;
        }
        if lo > hi {
            return None;
        }
        if c.is_some_and(|c| lo <= c && c <= hi) {
            found = true;
        }
        ranges += 1;
    }
}

/// One character of a class (`\` escapes); `None` at the end of the pattern or at a
/// bare `-` or `]`.
fn class_char(p: &[char]) -> Option<(char, &[char])> {
    match p.split_first()? {
        ('-' | ']', _) => None,
        ('\\', after) => after.split_first().map(|(&c, rest)| (c, rest)),
        (&c, rest) => Some((c, rest)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_filepath_match_cases() {
        // From Go's path/filepath match_test.go (those without a separator).
        let cases: &[(&str, &str, bool)] = &[
            ("abc", "abc", true),
            ("*", "abc", true),
            ("*c", "abc", true),
            ("a*", "a", true),
            ("a*", "abc", true),
            ("a*/b", "abc/b", true),
            ("a*b*c*d*e*/f", "axbxcxdxe/f", true),
            ("ab[c]", "abc", true),
            ("ab[b-d]", "abc", true),
            ("ab[e-g]", "abc", false),
            ("ab[^c]", "abc", false),
            ("ab[^b-d]", "abc", false),
            ("ab[^e-g]", "abc", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "ab", false),
            ("a?b", "a☺b", true),
            ("a[^a]b", "a☺b", true),
            ("a???b", "a☺b", false),
            ("a[^a][^a][^a]b", "a☺b", false),
            ("[a-ζ]*", "α", true),
            ("*[a-ζ]", "A", false),
            ("[\\-]", "-", true),
            ("[x\\-]", "x", true),
            ("[x\\-]", "-", true),
            ("[x\\-]", "z", false),
            ("[\\-x]", "a", false),
            ("*x", "xxx", true),
        ];
        for &(pattern, text, want) in cases {
            assert_eq!(matches(pattern, text), want, "{pattern} ~ {text}");
        }
    }

    #[test]
    fn malformed_patterns_match_nothing() {
        for (pattern, text) in [
            ("[]a]", "]"),
            ("[-]", "-"),
            ("[x-]", "x"),
            ("[-x]", "x"),
            ("\\", "a"),
            ("[a-b-c]", "a"),
            ("[", "a"),
            ("[^", "a"),
            ("[^bc", "a"),
            ("a[", "a"),
            ("a[", "ab"),
            ("*x[", "xxx"),
            ("[z-a]", "m"),
        ] {
            assert!(!matches(pattern, text), "{pattern} ~ {text}");
        }
    }

    #[test]
    fn registry_host_labels() {
        assert!(matches("*", "registry"));
        assert!(matches("reg?", "reg1"));
        assert!(!matches("reg?", "registry"));
        assert!(!matches("registry", "Registry"));
    }
}
