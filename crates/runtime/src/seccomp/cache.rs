//! The daemon's compiled seccomp programs: each distinct filter is compiled once.
//!
//! Keyed by the SHA-256 of the compiler's identity (libseccomp version, API level,
//! machine) and the filter's OCI JSON, held in memory, and kept on disk as
//! `<dir>/<key>.bpf` so that a restarted daemon does not compile again. A file is
//! written temp+fsync+rename, never changed afterwards, and checked when read: magic,
//! the SHA-256 of flags and program, and the program's shape. A file that fails the check is logged,
//! compiled again and replaced. Callers are blocking threads (the bundle is prepared
//! in spawn_blocking); one lock serialises compiles, so a burst of pods with the same
//! filter compiles it once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use oci_spec::runtime::LinuxSeccomp;
use sha2::{Digest, Sha256};

use super::error::ProgramError;
use super::program::{CompiledFilter, compile, compiler_identity};

/// First bytes of a cache file (the format's version is in it).
const MAGIC: &[u8] = b"podhost seccomp program v1\n";
/// Magic, flags (u32 little-endian), SHA-256 of flags and program, then the program.
const HEADER_BYTES: usize = MAGIC.len() + 4 + 32;
/// Larger than any valid file (a program is at most 4096 8-byte instructions).
const MAX_FILE_BYTES: u64 = (HEADER_BYTES + 4096 * 8) as u64;

/// Compiled programs by filter, in memory and under a directory.
pub struct ProgramCache {
    dir: PathBuf,
    identity: String,
    programs: Mutex<HashMap<String, Arc<CompiledFilter>>>,
}

impl std::fmt::Debug for ProgramCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramCache")
            .field("dir", &self.dir)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// Where a program came from (for the log line and the tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Memory,
    File,
    Compiled,
}

impl ProgramCache {
    /// A cache keeping its files under `dir` (created on the first write).
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            identity: compiler_identity(),
            programs: Mutex::new(HashMap::new()),
        }
    }

    /// The file a filter's program is kept in.
    pub fn file_for(&self, seccomp: &LinuxSeccomp) -> PathBuf {
        self.dir.join(format!("{}.bpf", self.key(seccomp)))
    }

    fn key(&self, seccomp: &LinuxSeccomp) -> String {
        let mut hash = Sha256::new();
        hash.update(self.identity.as_bytes());
        hash.update(b"\n");
        // serde_json of oci-spec's types is deterministic (no maps in LinuxSeccomp).
        hash.update(serde_json::to_vec(seccomp).unwrap_or_default());
        hex::encode(hash.finalize())
    }

    /// The program of `seccomp` (OCI meaning), compiled at most once per distinct filter.
    pub fn program(&self, seccomp: &LinuxSeccomp) -> Result<Arc<CompiledFilter>, ProgramError> {
        self.program_from(seccomp).map(|(p, _)| p)
    }

    /// [`Self::program`], saying where it came from.
    pub fn program_from(
        &self,
        seccomp: &LinuxSeccomp,
    ) -> Result<(Arc<CompiledFilter>, Source), ProgramError> {
        let key = self.key(seccomp);
        let mut programs = self
            .programs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(p) = programs.get(&key) {
            return Ok((p.clone(), Source::Memory));
        }
        let path = self.dir.join(format!("{key}.bpf"));
        let (program, source) = match read_file(&path) {
            Ok(Some(p)) => (p, Source::File),
            Ok(None) => (self.compile_and_keep(seccomp, &path)?, Source::Compiled),
            Err(e) => {
                tracing::warn!(error = %e, "compiling the seccomp filter again");
                (self.compile_and_keep(seccomp, &path)?, Source::Compiled)
            }
        };
        let program = Arc::new(program);
        programs.insert(key, program.clone());
        Ok((program, source))
    }

    fn compile_and_keep(
        &self,
        seccomp: &LinuxSeccomp,
        path: &Path,
    ) -> Result<CompiledFilter, ProgramError> {
        let started = std::time::Instant::now();
        let program = compile(seccomp)?;
        tracing::info!(
            instructions = program.instructions(),
            micros = podhost_model_core::convert::micros(started.elapsed()),
            file = %path.display(),
            "seccomp filter compiled"
        );
        // Without its file the program is still good for this daemon's life.
        if let Err(e) = podhost_disk::write_atomic(path, &encode(&program)) {
            let e = ProgramError::CacheWrite(e);
            tracing::warn!(error = %e, "the compiled seccomp program is kept in memory only");
        }
        Ok(program)
    }
}

fn encode(program: &CompiledFilter) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_BYTES + program.program.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&program.flags.to_le_bytes());
    bytes.extend_from_slice(&file_hash(program.flags, &program.program));
    bytes.extend_from_slice(&program.program);
    bytes
}

/// What a file's hash covers: the flags and the program.
fn file_hash(flags: u32, program: &[u8]) -> [u8; 32] {
    let mut hash = Sha256::new();
    hash.update(flags.to_le_bytes());
    hash.update(program);
    hash.finalize().into()
}

/// The program in `path`: `Ok(None)` when there is no file, an error when the file is
/// not a valid, intact program.
fn read_file(path: &Path) -> Result<Option<CompiledFilter>, ProgramError> {
    use std::io::Read;
    let read_err = |source| ProgramError::CacheRead {
        path: path.to_path_buf(),
        source,
    };
    let corrupt = |reason| ProgramError::CacheCorrupt {
        path: path.to_path_buf(),
        reason,
    };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(corrupt("larger than any program"));
    }
    let Some(rest) = bytes.strip_prefix(MAGIC) else {
        return Err(corrupt("it does not start with the format's magic"));
    };
    if rest.len() < 36 {
        return Err(corrupt("it is shorter than its header"));
    }
    let (flags, rest) = rest.split_at(4);
    let (hash, program) = rest.split_at(32);
    let flags = u32::from_le_bytes([flags[0], flags[1], flags[2], flags[3]]);
    if hash != file_hash(flags, program) {
        return Err(corrupt("its flags and program do not match their SHA-256"));
    }
    CompiledFilter::new(program.to_vec(), flags)
        .map(Some)
        .map_err(|_| corrupt("its program is not a whole, loadable BPF program"))
}
