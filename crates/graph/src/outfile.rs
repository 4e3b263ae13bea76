//! Output files that elements create when they are configured (ToDump's capture,
//! IPPrint's OUTFILE), staged so that a configuration that is built but never runs (a
//! `hotconfig` write that is refused, or one the router stops before taking) leaves the
//! files of the running configuration as they are.
//!
//! A name that is a regular file, or nothing yet, is written as a temporary file
//! beside it, which [`Staged::commit`] renames into place when the configuration
//! becomes the router's ([`crate::router::RouterSpec::commit`]); dropped uncommitted, the
//! temporary file goes. A FIFO, a device, a symbolic link, or a directory in which no
//! temporary file can be made is opened directly, as Click opens it.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A file being written under a temporary name until its configuration commits.
pub struct Staged {
    target: PathBuf,
    /// The temporary file, until renamed into place (or `None` when opened directly).
    temp: Mutex<Option<PathBuf>>,
}

/// Creates `path` for writing (see the module's description).
pub fn create(path: &Path) -> io::Result<(File, Staged)> {
    let direct = |path: &Path| {
        File::create(path).map(|f| {
            let s = Staged {
                target: path.to_path_buf(),
                temp: Mutex::new(None),
            };
            (f, s)
        })
    };
    // A file under another name too (a hard link), or one that is a mount point of
    // its own (a file bind-mounted into a container), is written where it is.
    let existing = match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() || m.nlink() > 1 => return direct(path),
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(_) => return direct(path),
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return direct(path);
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    if let Some(m) = &existing {
        if !same_mount(path, m, dir) {
            return direct(path);
        }
    }
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    for _ in 0..64 {
        let temp = dir.join(format!(
            ".{}.brickroute-{}-{}",
            name.to_string_lossy(),
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        ));
        let f = match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(f) => f,
            // A name left by an earlier run: the next one.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            // A directory where only the file itself may be written.
            Err(_) => return direct(path),
        };
        // The file keeps its mode and owner (a capture readable by its owner only
        // stays so); where they cannot be kept it is written where it is.
        if let Some(m) = &existing {
            let kept = f
                .set_permissions(m.permissions())
                .and_then(|()| std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid())));
            if kept.is_err() {
                drop(f);
                let _ = std::fs::remove_file(&temp);
                return direct(path);
            }
        }
        let staged = Staged {
            target: path.to_path_buf(),
            temp: Mutex::new(Some(temp)),
        };
        return Ok((f, staged));
    }
    direct(path)
}

/// Whether file `path` (`meta`, its metadata) is on the mount of directory `dir`, so
/// that a file renamed there replaces it: by the kernel's mount IDs (Linux 5.8 and
/// later), else by the device numbers (a file bind-mounted from the same file system
/// then goes unnoticed, and its rename fails at the commit, which says so).
fn same_mount(path: &Path, meta: &std::fs::Metadata, dir: &Path) -> bool {
    // The file without following it (a link was opened directly above), the directory
    // as the path reaches it (following a link such as /var/run -> /run).
    match (mount_id(path, libc::AT_SYMLINK_NOFOLLOW), mount_id(dir, 0)) {
        (Some(f), Some(d)) => f == d,
        _ => std::fs::metadata(dir).is_ok_and(|d| d.dev() == meta.dev()),
    }
}

/// The mount `path` is on (itself if it is a mount point), with statx(2) `flags`;
/// `None` if the kernel does not say.
fn mount_id(path: &Path, flags: libc::c_int) -> Option<u64> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: an all-zero statx is a valid value of the plain C struct.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `stx` a writable statx the kernel fills.
    let r = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), flags, libc::STATX_MNT_ID, &mut stx) };
    (r == 0 && stx.stx_mask & libc::STATX_MNT_ID != 0).then_some(stx.stx_mnt_id)
}

impl Staged {
    /// Puts the file in place under its name (once; later calls do nothing).
    pub fn commit(&self) -> Result<(), String> {
        let mut temp = self.temp.lock().unwrap_or_else(|e| e.into_inner());
        let Some(t) = temp.take() else {
            return Ok(());
        };
        std::fs::rename(&t, &self.target).map_err(|e| {
            format!(
                "{}: {} (the output goes to {})",
                self.target.display(),
                e,
                t.display()
            )
        })
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(t) = self.temp.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = std::fs::remove_file(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::FileTypeExt;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_file_goes_in_place_when_committed_and_nowhere_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.pcap");
        std::fs::write(&target, b"running").unwrap();

        // Dropped uncommitted: the file under its name is untouched, no trace left.
        let (mut f, staged) = create(&target).unwrap();
        f.write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"running");
        drop(staged);
        assert_eq!(names(dir.path()), ["out.pcap"]);

        // Committed: the new bytes are the file's, also those written after.
        let (mut f, staged) = create(&target).unwrap();
        f.write_all(b"new").unwrap();
        staged.commit().unwrap();
        f.write_all(b" and more").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new and more");
        assert_eq!(names(dir.path()), ["out.pcap"]);
        // A second commit does nothing.
        staged.commit().unwrap();
        drop(staged);
        assert_eq!(std::fs::read(&target).unwrap(), b"new and more");
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_linked_one_is_written_in_place() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("private.pcap");
        std::fs::write(&target, b"old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (_f, staged) = create(&target).unwrap();
        staged.commit().unwrap();
        let m = std::fs::metadata(&target).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        assert_eq!(m.len(), 0);

        // Under two names: written where it is, so both names see it.
        let other = dir.path().join("other-name");
        std::fs::hard_link(&target, &other).unwrap();
        let (mut f, staged) = create(&target).unwrap();
        f.write_all(b"both").unwrap();
        drop(staged);
        assert_eq!(std::fs::read(&other).unwrap(), b"both");
        assert_eq!(names(dir.path()), ["other-name", "private.pcap"]);
    }

    #[test]
    fn a_file_reached_through_a_linked_directory_is_staged() {
        // As /var/run -> /run: the directory is a link to another file system.
        let elsewhere = tempfile::tempdir_in("/dev/shm").unwrap();
        let here = tempfile::tempdir().unwrap();
        let linked = here.path().join("run");
        std::os::unix::fs::symlink(elsewhere.path(), &linked).unwrap();
        let target = linked.join("x.pcap");
        std::fs::write(&target, b"running").unwrap();
        let (_f, staged) = create(&target).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"running");
        drop(staged);
        assert_eq!(names(elsewhere.path()), ["x.pcap"]);
    }

    #[test]
    fn what_is_not_a_regular_file_is_opened_directly() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::write(&real, b"old").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        // Through the link, as Click writes it: truncated at once, the link kept.
        let (mut f, staged) = create(&link).unwrap();
        assert_eq!(std::fs::read(&real).unwrap(), b"");
        f.write_all(b"x").unwrap();
        drop(staged);
        assert_eq!(std::fs::read(&real).unwrap(), b"x");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(names(dir.path()), ["link", "real"]);
        // A device.
        let (mut f, staged) = create(Path::new("/dev/null")).unwrap();
        f.write_all(b"x").unwrap();
        staged.commit().unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }
}
