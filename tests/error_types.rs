//! Errors are typed: outside `main.rs` and `cli/` (where anyhow turns them into a
//! message for the user), no function returns `Result<_, String>`. A String error
//! cannot be matched on, loses its cause chain, and tends to lose the file, pod or
//! field it was about; each module has a `thiserror` enum instead.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::source_scan;

use source_scan::workspace_sources;
use std::path::Path;

/// The text of `src` with `//` comments blanked out (so that prose about
/// `Result<_, String>` is not code), keeping line numbers.
fn without_line_comments(src: &str) -> String {
    src.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The 1-based lines where a `Result<…>` whose last type argument is `String` starts.
/// The generic arguments are matched by depth (a `->` or `=>` inside them is not a
/// closing bracket), so nested types and signatures split over lines are found.
fn string_error_results(src: &str) -> Vec<usize> {
    let code = without_line_comments(src);
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("Result<") {
        let start = from + at;
        from = start + 1;
        // `io::Result<` and `fmt::Result<` take no error type; `SomeResult<` is another type.
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let args_start = start + "Result<".len();
        // The top-level type arguments, split at depth-1 commas.
        let (mut depth, mut arg_start, mut args, mut closed) = (1usize, args_start, vec![], false);
        for (i, &b) in bytes.iter().enumerate().skip(args_start) {
            match b {
                b'<' => depth += 1,
                b'>' if bytes[i - 1] == b'-' || bytes[i - 1] == b'=' => {}
                b'>' => {
                    depth -= 1;
                    if depth == 0 {
                        args.push(&code[arg_start..i]);
                        closed = true;
                        break;
                    }
                }
                b',' if depth == 1 => {
                    args.push(&code[arg_start..i]);
                    arg_start = i + 1;
                }
                b';' | b'{' => break,
                _ => {}
            }
        }
        let args: Vec<String> = args
            .iter()
            .map(|a| a.chars().filter(|c| !c.is_whitespace()).collect::<String>())
            .filter(|a| !a.is_empty())
            .collect();
        if !closed || args.len() < 2 {
            continue;
        }
        let error_type = args[args.len() - 1].as_str();
        if matches!(
            error_type,
            "String" | "std::string::String" | "alloc::string::String"
        ) {
            found.push(code[..start].matches('\n').count() + 1);
        }
    }
    found
}

#[test]
fn the_detector_finds_string_errors_and_nothing_else() {
    let src = "fn a() -> Result<u64, String> {}\n\
               fn b(\n    x: u8,\n) -> Result<\n    Vec<Option<String>>,\n    String,\n> {}\n\
               fn c() -> Result<Vec<String>, MyError> {}\n\
               fn d() -> io::Result<String> {}\n\
               fn e() -> Result<Box<dyn Fn() -> u8>, String> {}\n\
               // fn f() -> Result<(), String> {}\n\
               fn g() -> Result<HashMap<String, String>, E> {}\n\
               let h = |k: &str| -> Result<Option<u64>, String> { todo!() };\n";
    assert_eq!(string_error_results(src), vec![1, 4, 10, 13]);
}

#[test]
fn no_function_outside_main_and_cli_returns_a_string_error() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let files = workspace_sources(root);
    let allowed = [src.join("main.rs"), src.join("cli")];
    let mut offenders = Vec::new();
    for file in &files {
        if allowed.iter().any(|a| file.starts_with(a)) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for line in string_error_results(&text) {
            offenders.push(format!(
                "{}:{line}",
                file.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(
        files.len() > 100,
        "only {} sources found under {} and its crates",
        files.len(),
        root.display()
    );
    assert!(
        offenders.is_empty(),
        "these return Result<_, String>; give the module's thiserror enum a variant that \
         names what failed, on what, and what to do (cause chained with #[source]):\n{}",
        offenders.join("\n")
    );
}
