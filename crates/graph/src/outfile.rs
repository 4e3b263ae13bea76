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
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => return direct(path),
        Err(e) if e.kind() != io::ErrorKind::NotFound => return direct(path),
        _ => {}
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return direct(path);
    };
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let temp = dir.join(format!(
        ".{}.brickroute-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    ));
    match OpenOptions::new().write(true).create_new(true).open(&temp) {
        Ok(f) => Ok((
            f,
            Staged {
                target: path.to_path_buf(),
                temp: Mutex::new(Some(temp)),
            },
        )),
        // A directory where only the file itself may be written.
        Err(_) => direct(path),
    }
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
