//! Output files that elements create when they are configured (ToDump's capture,
//! IPPrint's OUTFILE), staged so that a configuration that is built but never runs (a
//! `hotconfig` write that is refused, or one the router stops before taking) leaves the
//! files of the running configuration as they are.
//!
//! A name that is a regular file, or nothing yet, is written as a temporary file
//! beside it, which [`Staged::commit`] renames into place when the configuration
//! becomes the router's ([`crate::router::RouterSpec::commit`]); dropped uncommitted, the
//! temporary file goes. A regular file that must keep its identity (other names, a
//! mount of its own, a symbolic link to it, a directory in which no temporary file can
//! be made) is opened at once, so an error shows at the build, but written in memory
//! until the commit, which empties it and gives the writer its descriptor. A FIFO or a
//! device is opened directly, as Click opens it.

use crate::elements::shared::lock;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A file being written elsewhere until its configuration commits.
pub struct Staged {
    target: PathBuf,
    /// Where the writes go until the commit (`None` when opened directly, or once
    /// committed).
    pending: Mutex<Option<Pending>>,
}

enum Pending {
    /// A temporary file beside the target, renamed over it at the commit.
    Renamed(PathBuf),
    /// A file written where it is: the target, opened (not emptied), the memory file
    /// the writes go to until the commit, and the descriptor number the writer holds
    /// (a duplicate of `memory`'s), which the commit points at the target.
    InPlace { file: File, memory: File, writer: RawFd },
}

/// Creates `path` for writing (see the module's description). The file returned must
/// stay open while the [`Staged`] lives: the commit may change what its descriptor
/// refers to.
pub fn create(path: &Path) -> io::Result<(File, Staged)> {
    let direct = |path: &Path| File::create(path).map(|f| (f, staged(path, None)));
    let existing = match std::fs::symlink_metadata(path) {
        // Written through the link, which stays.
        Ok(m) if m.file_type().is_symlink() => {
            return match std::fs::metadata(path) {
                Ok(t) if t.is_file() => in_place(path),
                _ => direct(path),
            }
        }
        Ok(m) if !m.file_type().is_file() => return direct(path),
        // Under another name too (a hard link): both names must see the new file.
        Ok(m) if m.nlink() > 1 => return in_place(path),
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(_) => return direct(path),
    };
    // Where no temporary file can replace it, an existing file is written in place;
    // a new one is simply created.
    let fallback = |path: &Path| {
        if existing.is_some() {
            in_place(path)
        } else {
            direct(path)
        }
    };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return fallback(path);
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    // A file that is a mount point of its own (bind-mounted into a container).
    if let Some(m) = &existing {
        if !same_mount(path, m, dir) {
            return in_place(path);
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
            Err(_) => return fallback(path),
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
                return in_place(path);
            }
        }
        return Ok((f, staged(path, Some(Pending::Renamed(temp)))));
    }
    fallback(path)
}

fn staged(target: &Path, pending: Option<Pending>) -> Staged {
    Staged {
        target: target.to_path_buf(),
        pending: Mutex::new(pending),
    }
}

/// Opens existing regular file `path` to be written where it is from the commit on:
/// opened for writing now (an error shows at the build), not emptied until then.
fn in_place(path: &Path) -> io::Result<(File, Staged)> {
    let file = OpenOptions::new().write(true).open(path)?;
    let memory = memory_file()?;
    let writer = memory.try_clone()?;
    let fd = writer.as_raw_fd();
    let pending = Pending::InPlace {
        file,
        memory,
        writer: fd,
    };
    Ok((writer, staged(path, Some(pending))))
}

/// An anonymous file in memory (memfd_create(2)): what a configuration writes before
/// its commit (a file header) is small.
fn memory_file() -> io::Result<File> {
    // SAFETY: the name is a NUL-terminated string; the call has no other effect.
    let fd = unsafe { libc::memfd_create(c"brickroute-outfile".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor just created and owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
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
    /// Whether the file is written elsewhere until the commit (a temporary name, or
    /// memory); false for one opened directly (a FIFO, a device), whose writes reach it
    /// at once.
    pub fn is_staged(&self) -> bool {
        lock(&self.pending).is_some()
    }

    /// Puts the file in place under its name (once; later calls do nothing).
    pub fn commit(&self) -> Result<(), String> {
        let pending = lock(&self.pending).take();
        match pending {
            None => Ok(()),
            Some(Pending::Renamed(t)) => std::fs::rename(&t, &self.target).map_err(|e| {
                format!(
                    "{}: {} (the output goes to {})",
                    self.target.display(),
                    e,
                    t.display()
                )
            }),
            Some(Pending::InPlace { file, memory, writer }) => {
                let done = still_writing(writer, &memory).and_then(|()| {
                    let copied = copy_over(&memory, &file);
                    // Whatever the copy did, the writer's descriptor goes to the
                    // file: the output must not pile up in memory.
                    point_at(writer, &file).and(copied)
                });
                done.map_err(|e| format!("{}: {}", self.target.display(), e))
            }
        }
    }
}

/// Whether descriptor `writer`, which `create` returned as a duplicate of `memory`'s,
/// still refers to it: refused if its `File` was closed (the number may be another
/// file's now).
fn still_writing(writer: RawFd, memory: &File) -> io::Result<()> {
    let m = memory.metadata()?;
    // SAFETY: an all-zero stat is a valid value of the plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st`, a valid stat; a closed `writer` is an error.
    if unsafe { libc::fstat(writer, &mut st) } < 0 || st.st_dev != m.dev() || st.st_ino != m.ino() {
        return Err(io::Error::other(
            "the writer's descriptor was closed before the commit; the file is left as it was",
        ));
    }
    Ok(())
}

/// Makes descriptor `writer` refer to `file` (at its offset), close-on-exec as it was.
fn point_at(writer: RawFd, file: &File) -> io::Result<()> {
    // SAFETY: `writer` refers to the memory file (`still_writing` checked it: its
    // `File` is open, owned by the element writing, so the number is not another
    // file's); dup3 makes it refer to `file`'s open file instead and closes the memory
    // file's reference at once, keeping the descriptor close-on-exec.
    if unsafe { libc::dup3(file.as_raw_fd(), writer, libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Empties `file` and writes `memory`'s bytes to it from the start, leaving its offset
/// after them.
fn copy_over(memory: &File, mut file: &File) -> io::Result<()> {
    file.set_len(0)?;
    let mut bytes = vec![0; memory.metadata()?.len() as usize];
    memory.read_exact_at(&mut bytes, 0)?;
    file.write_all(&bytes)
}

impl Drop for Staged {
    fn drop(&mut self) {
        let pending = self.pending.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(Pending::Renamed(t)) = pending {
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

        // Under two names: written where it is, so both names see it, but only from
        // the commit on.
        let other = dir.path().join("other-name");
        std::fs::hard_link(&target, &other).unwrap();
        std::fs::write(&target, b"running").unwrap();
        let (mut f, staged) = create(&target).unwrap();
        f.write_all(b"header").unwrap();
        assert_eq!(std::fs::read(&other).unwrap(), b"running");
        staged.commit().unwrap();
        f.write_all(b", records").unwrap();
        assert_eq!(std::fs::read(&other).unwrap(), b"header, records");
        assert_eq!(std::fs::read(&target).unwrap(), b"header, records");
        assert_eq!(names(dir.path()), ["other-name", "private.pcap"]);
        // Dropped uncommitted, it is left as it was.
        let (mut f, staged) = create(&other).unwrap();
        f.write_all(b"refused").unwrap();
        drop(staged);
        drop(f);
        assert_eq!(std::fs::read(&target).unwrap(), b"header, records");
    }

    #[test]
    fn a_file_written_in_place_takes_what_a_buffered_writer_still_holds() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("capture");
        std::fs::write(&target, b"running capture").unwrap();
        std::fs::hard_link(&target, dir.path().join("link")).unwrap();
        let (f, staged) = create(&target).unwrap();
        let mut w = std::io::BufWriter::new(f);
        w.write_all(b"flushed ").unwrap();
        w.flush().unwrap();
        w.write_all(b"buffered").unwrap();
        staged.commit().unwrap();
        drop(staged);
        drop(w);
        assert_eq!(std::fs::read(&target).unwrap(), b"flushed buffered");
    }

    #[test]
    fn a_file_written_in_place_stays_close_on_exec_and_needs_its_writer_open() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("capture");
        std::fs::write(&target, b"running").unwrap();
        std::fs::hard_link(&target, dir.path().join("link")).unwrap();
        let cloexec = |f: &File| {
            // SAFETY: F_GETFD on an open descriptor only reads its flags.
            let flags = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFD) };
            flags & libc::FD_CLOEXEC != 0
        };
        let (f, staged) = create(&target).unwrap();
        assert!(cloexec(&f));
        staged.commit().unwrap();
        assert!(cloexec(&f));
        drop(f);
        // A writer closed before the commit, its number taken by another file: the
        // commit refuses, and neither file is touched.
        std::fs::write(&target, b"running again").unwrap();
        let (f, staged) = create(&target).unwrap();
        let number = f.as_raw_fd();
        drop(f);
        let other = File::create(dir.path().join("other")).unwrap();
        assert_eq!(other.as_raw_fd(), number);
        let e = staged.commit().unwrap_err();
        assert!(
            e.ends_with("the writer's descriptor was closed before the commit; the file is left as it was"),
            "{e}"
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"running again");
        (&other).write_all(b"other").unwrap();
        assert_eq!(std::fs::read(dir.path().join("other")).unwrap(), b"other");
    }

    #[test]
    fn a_dangling_link_into_a_missing_directory_fails_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let dir_link = dir.path().join("d");
        std::os::unix::fs::symlink(dir.path().join("no-such-dir/f"), &dir_link).unwrap();
        // A dangling link is opened directly: its directory does not exist.
        assert!(create(&dir_link).is_err());
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
    fn a_symbolic_link_is_written_through_and_a_device_directly() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::write(&real, b"old").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        // Through the link, as Click writes it, the link kept; emptied only at the
        // commit.
        let (mut f, staged) = create(&link).unwrap();
        f.write_all(b"x").unwrap();
        assert_eq!(std::fs::read(&real).unwrap(), b"old");
        staged.commit().unwrap();
        f.write_all(b"y").unwrap();
        assert_eq!(std::fs::read(&real).unwrap(), b"xy");
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
