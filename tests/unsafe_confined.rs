//! `unsafe` lives only in `src/runtime/` and `src/shim/` (docs/architecture.md,
//! "Modules and layering"): the kernel-facing code. Everywhere else calls a safe
//! function of theirs. This scans the sources (no root needed) and fails naming each
//! file and line that breaks the rule; comments, string and char literals and
//! identifiers such as `unsafe_sysctls` do not count.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::source_scan;

use source_scan::rust_files;
use std::path::Path;

/// The directories under `src/` where `unsafe` is allowed.
const ALLOWED: [&str; 2] = ["src/runtime", "src/shim"];

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `text` with comments and string/char literals replaced by spaces (newlines kept, so
/// line numbers stay right): what is left is code.
fn code_only(text: &str) -> String {
    let s: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        let prev_ident = i > 0 && is_ident(s[i - 1]);
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // Block comments nest in Rust.
            let mut depth = 0;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, s[i]);
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(&s, i).filter(|_| !prev_ident) {
            for &ch in &s[i..end] {
                blank(&mut out, ch);
            }
            i = end;
        } else if c == '"' {
            blank(&mut out, c);
            i += 1;
            while i < s.len() && s[i] != '"' {
                if s[i] == '\\' {
                    blank(&mut out, s[i]);
                    i += 1;
                }
                if i < s.len() {
                    blank(&mut out, s[i]);
                    i += 1;
                }
            }
            if i < s.len() {
                out.push(' ');
                i += 1;
            }
        } else if c == '\'' && (next == Some('\\') || s.get(i + 2) == Some(&'\'')) {
            // A char literal ('x' or an escape); a lifetime ('a) has no closing quote.
            out.push(' ');
            i += 1;
            if s.get(i) == Some(&'\\') {
                out.push(' ');
                i += 1;
            }
            while i < s.len() && s[i] != '\'' {
                blank(&mut out, s[i]);
                i += 1;
            }
            if i < s.len() {
                out.push(' ');
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Where the raw string literal starting at `i` (`r"…"`, `r#"…"#`, `br…`, `cr…`) ends.
fn raw_string_end(s: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if matches!(s.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if s.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = s[j..].iter().take_while(|c| **c == '#').count();
    j += hashes;
    if s.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < s.len() {
        if s[j] == '"'
            && s[j + 1..]
                .iter()
                .take(hashes)
                .filter(|c| **c == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(s.len())
}

/// The 1-based lines of `text` that use the `unsafe` keyword in code.
fn unsafe_lines(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    for (n, line) in code_only(text).lines().enumerate() {
        let chars: Vec<char> = line.chars().collect();
        let word: Vec<char> = "unsafe".chars().collect();
        let hit = (0..chars.len()).any(|i| {
            chars[i..].starts_with(&word)
                && (i == 0 || !is_ident(chars[i - 1]))
                && chars.get(i + word.len()).is_none_or(|c| !is_ident(*c))
        });
        if hit {
            found.push(n + 1);
        }
    }
    found
}

#[test]
fn the_scanner_sees_code_not_words() {
    let lines = |t: &str| unsafe_lines(t);
    assert_eq!(lines("fn f() {\n    unsafe { g() }\n}"), vec![2]);
    assert_eq!(lines("pub unsafe fn f() {}"), vec![1]);
    assert_eq!(lines("unsafe impl Send for X {}"), vec![1]);
    assert_eq!(lines("let x = unsafe{g()};"), vec![1]);
    // Not code: comments, literals, longer identifiers.
    assert!(lines("// unsafe { }\n/* unsafe /* nested */ unsafe */").is_empty());
    assert!(lines("let s = \"unsafe\"; let t = \"a \\\" unsafe\";").is_empty());
    assert!(lines("let s = r#\"unsafe \"quoted\" unsafe\"#;").is_empty());
    assert!(lines("let b = br\"unsafe\";").is_empty());
    assert!(lines("let unsafe_patterns = allowed_unsafe_sysctls;").is_empty());
    assert!(lines("let c = '\"'; let d = '\\''; fn f<'a>(x: &'a str) {}").is_empty());
    // After a literal, code is seen again.
    assert_eq!(lines("let s = \"x\"; unsafe { g() }"), vec![1]);
    assert_eq!(lines("let c = '\"'; unsafe { g() }"), vec![1]);
    assert_eq!(lines("fn f<'a>(x: &'a u8) { unsafe { g() } }"), vec![1]);
}

#[test]
fn unsafe_only_in_runtime_and_shim() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = rust_files(&root.join("src"));
    assert!(
        files.len() > 100,
        "found only {} sources under src/",
        files.len()
    );
    let mut offenders = Vec::new();
    let mut allowed_uses = 0;
    for file in &files {
        let rel = file.strip_prefix(root).unwrap();
        let text = std::fs::read_to_string(file).unwrap();
        let lines = unsafe_lines(&text);
        if ALLOWED.iter().any(|dir| rel.starts_with(dir)) {
            allowed_uses += lines.len();
            continue;
        }
        for line in lines {
            offenders.push(format!("{}:{line}", rel.display()));
        }
    }
    // The scanner finds the real ones (runtime/ and shim/ are full of syscalls).
    assert!(
        allowed_uses > 10,
        "found only {allowed_uses} unsafe uses in runtime/ and shim/"
    );
    assert!(
        offenders.is_empty(),
        "`unsafe` outside src/runtime/ and src/shim/; move the call behind a small safe \
         function in runtime/ (with its // SAFETY: comment) and call that:\n{}",
        offenders.join("\n")
    );
}
