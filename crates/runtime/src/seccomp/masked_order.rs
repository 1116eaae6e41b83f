//! libcontainer 0.7 reads SCMP_CMP_MASKED_EQ arguments the other way round.
//!
//! In the OCI runtime spec as runc applies it (and as moby's and containerd's profiles
//! are written), a masked comparison's `value` is the mask and `valueTwo` the value the
//! masked argument must equal: libseccomp's `SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, mask,
//! datum)`. libcontainer 0.7 (still so upstream in August 2026) passes `valueTwo` as the
//! mask and `value` as the datum, so `clone` with `value: 0x7e020000, valueTwo: 0`
//! becomes `arg & 0 == 0x7e020000`, which libseccomp reduces to "always": namespace
//! flags would pass. The bundle's config.json is read only by libcontainer, so podhost
//! writes masked comparisons there in libcontainer's order; everything before that
//! (profiles, [`super::linux_seccomp`]) keeps the OCI meaning.

use oci_spec::OciSpecError;
use oci_spec::runtime::{LinuxSeccomp, LinuxSeccompArgBuilder, LinuxSeccompOperator};

/// `seccomp` with every masked comparison's mask and value exchanged, for libcontainer.
/// (The argument builder's error cannot happen: every field is set.)
pub fn for_libcontainer(seccomp: &LinuxSeccomp) -> Result<LinuxSeccomp, OciSpecError> {
    let mut out = seccomp.clone();
    let Some(syscalls) = seccomp.syscalls() else {
        return Ok(out);
    };
    let mut syscalls = syscalls.clone();
    for rule in &mut syscalls {
        let Some(args) = rule.args() else { continue };
        let swapped = args
            .iter()
            .map(|arg| {
                if arg.op() != LinuxSeccompOperator::ScmpCmpMaskedEq {
                    return Ok(*arg);
                }
                LinuxSeccompArgBuilder::default()
                    .index(arg.index())
                    .op(arg.op())
                    .value(arg.value_two().unwrap_or(0))
                    .value_two(arg.value())
                    .build()
            })
            .collect::<Result<_, _>>()?;
        rule.set_args(Some(swapped));
    }
    out.set_syscalls(Some(syscalls));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn masked_comparisons_swap_and_nothing_else_changes() {
        let oci = super::super::runtime_default("x86_64", &HashSet::new()).unwrap();
        let lc = for_libcontainer(&oci).unwrap();
        let rules = |s: &LinuxSeccomp| s.syscalls().clone().unwrap();
        let (before, after) = (rules(&oci), rules(&lc));
        assert_eq!(before.len(), after.len());
        let mut masked = 0;
        for (b, a) in before.iter().zip(&after) {
            assert_eq!(b.names(), a.names());
            assert_eq!(b.action(), a.action());
            for (x, y) in b.args().iter().flatten().zip(a.args().iter().flatten()) {
                if x.op() == LinuxSeccompOperator::ScmpCmpMaskedEq {
                    masked += 1;
                    // clone: OCI mask 0x7e020000 / value 0 → libcontainer value 0 / mask.
                    assert_eq!((x.value(), x.value_two()), (0x7e02_0000, Some(0)));
                    assert_eq!((y.value(), y.value_two()), (0, Some(0x7e02_0000)));
                } else {
                    assert_eq!(x, y);
                }
            }
        }
        assert_eq!(masked, 1);
        assert_eq!(oci.default_action(), lc.default_action());
        assert_eq!(oci.architectures(), lc.architectures());
    }
}
