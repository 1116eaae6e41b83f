//! `podhost-monitor` is linked static-pie by build.rs (what it maps is the per-container
//! memory cost): no interpreter, no shared library, still position-independent (ASLR),
//! and it starts. A shared library build.rs does not replace would leave a binary that
//! needs one but has no interpreter to load it: these tests catch that.

// Test code: a failed unwrap/expect is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

const MONITOR: &str = env!("CARGO_BIN_EXE_podhost-monitor");

const ET_DYN: u16 = 3;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn usize_at(b: &[u8], at: usize) -> usize {
    usize::try_from(u64_at(b, at)).unwrap()
}

/// (type, file offset, file size) of each program header of a little-endian ELF64 file.
fn program_headers(elf: &[u8]) -> Vec<(u32, usize, usize)> {
    assert_eq!(&elf[..4], b"\x7fELF", "{MONITOR} is not an ELF file");
    assert_eq!(elf[4], 2, "{MONITOR} is not ELF64");
    assert_eq!(elf[5], 1, "{MONITOR} is not little-endian");
    let (phoff, phentsize, phnum) = (
        usize_at(elf, 0x20),
        usize::from(u16_at(elf, 0x36)),
        usize::from(u16_at(elf, 0x38)),
    );
    (0..phnum)
        .map(|i| {
            let ph = phoff + i * phentsize;
            (
                u32_at(elf, ph),
                usize_at(elf, ph + 8),
                usize_at(elf, ph + 32),
            )
        })
        .collect()
}

#[test]
fn the_monitor_is_a_static_pie_without_shared_libraries() {
    let elf = std::fs::read(MONITOR).unwrap();
    assert_eq!(
        u16_at(&elf, 0x10),
        ET_DYN,
        "{MONITOR} is not position-independent (ASLR)"
    );
    let headers = program_headers(&elf);
    assert!(
        !headers.iter().any(|(kind, _, _)| *kind == PT_INTERP),
        "{MONITOR} asks for a dynamic loader: build.rs's static link did not apply"
    );
    let needed: Vec<u64> = headers
        .iter()
        .filter(|(kind, _, _)| *kind == PT_DYNAMIC)
        .flat_map(|(_, offset, size)| {
            elf[*offset..*offset + *size]
                .chunks_exact(16)
                .map(|entry| (u64_at(entry, 0), u64_at(entry, 8)))
                .take_while(|(tag, _)| *tag != DT_NULL)
                .filter(|(tag, _)| *tag == DT_NEEDED)
                .map(|(_, name)| name)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        needed.is_empty(),
        "{MONITOR} needs {} shared libraries and has no loader: add them to build.rs's STATIC_FOR",
        needed.len()
    );
}

#[test]
fn the_static_monitor_starts_logs_and_refuses_a_bad_command_line() {
    let out = std::process::Command::new(MONITOR).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{:?} {stderr}", out.status);
    assert!(
        stderr.contains("ERROR") && stderr.contains("usage: podhost-monitor shim CONFIG"),
        "{stderr}"
    );
}
