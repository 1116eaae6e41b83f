//! Device rules on a cgroup v1 devices controller: reset the cgroup to "deny all", write
//! each rule to devices.allow or devices.deny in order, and check devices.list.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use super::DevicesError;
use super::policy::DevicePolicy;
use super::rules::{DeviceKind, DeviceRule};

/// Where the v1 devices controller is mounted, from `/proc/self/mountinfo`.
///
/// Read line by line up to the match: the kernel formats mountinfo as it is read, and
/// the cgroup mounts come first, while every pod adds lines to the end (its overlay,
/// its /dev/shm, its namespace pins): with 100 pods running, reading the whole file
/// cost about as much CPU as the rest of the device set-up.
pub fn devices_mount() -> Result<PathBuf, DevicesError> {
    let path = Path::new("/proc/self/mountinfo");
    let file = std::fs::File::open(path).map_err(|e| DevicesError::io("cannot read", path, e))?;
    for line in std::io::BufReader::new(file).lines() {
        let line = line.map_err(|e| DevicesError::io("cannot read", path, e))?;
        if let Some(mount) = devices_mount_of(&line) {
            return Ok(mount);
        }
    }
    Err(DevicesError::NoDevicesCgroup {
        detail: "no cgroup mount with the devices option in /proc/self/mountinfo".into(),
    })
}

/// The mount point of the first `cgroup` filesystem whose super options name `devices`.
#[cfg(test)]
fn find_devices_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(devices_mount_of)
}

/// The mount point of this mountinfo line if it is a `cgroup` filesystem whose super
/// options name `devices`.
fn devices_mount_of(line: &str) -> Option<PathBuf> {
    let (before, after) = line.split_once(" - ")?;
    let mut after = after.split(' ');
    let (fstype, _source, options) = (after.next()?, after.next()?, after.next()?);
    if fstype != "cgroup" || !options.split(',').any(|o| o == "devices") {
        return None;
    }
    before.split(' ').nth(4).map(PathBuf::from)
}

fn write(dir: &Path, file: &str, line: &str) -> Result<(), DevicesError> {
    let path = dir.join(file);
    std::fs::write(&path, line).map_err(|e| DevicesError::io("cannot write", path, e))
}

/// The lines of devices.list.
pub fn read_list(dir: &Path) -> Result<Vec<String>, DevicesError> {
    let path = dir.join("devices.list");
    let text =
        std::fs::read_to_string(&path).map_err(|e| DevicesError::io("cannot read", &path, e))?;
    Ok(text.lines().map(str::to_string).collect())
}

/// Makes `rules` the device rules of the v1 devices cgroup `dir`, whatever was there
/// (libcontainer writes its own, looser defaults), and checks the kernel's list.
pub fn apply(dir: &Path, rules: &[DeviceRule]) -> Result<(), DevicesError> {
    // "a" in devices.deny empties the exception list and makes deny the default, so the
    // rules alone decide (as the eBPF program of cgroup v2 starts from deny).
    write(dir, "devices.deny", "a")?;
    for rule in rules {
        let file = if rule.allow {
            "devices.allow"
        } else {
            "devices.deny"
        };
        let line = if rule.kind == DeviceKind::All {
            "a".to_string()
        } else {
            rule.v1_line()
        };
        write(dir, file, &line)?;
    }
    let expected = DevicePolicy::from_rules(rules).v1_list();
    let actual = read_list(dir)?;
    if actual != expected {
        return Err(DevicesError::V1Mismatch {
            path: dir.join("devices.list"),
            expected,
            actual,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_devices_hierarchy() {
        let info = "\
35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n\
36 25 0:31 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu\n\
37 25 0:32 / /sys/fs/cgroup/devices rw,nosuid shared:9 - cgroup cgroup rw,devices\n";
        assert_eq!(
            find_devices_mount(info),
            Some(PathBuf::from("/sys/fs/cgroup/devices"))
        );
        assert_eq!(find_devices_mount(&info.replace("devices", "pids")), None);
    }
}
