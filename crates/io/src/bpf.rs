//! The few bpf(2) commands brickroute's ports need: create maps, update them, load a
//! program (with the verifier's log on failure), attach an XDP program with a bpf_link,
//! and read a loaded program's name by id. [`asm`] writes the programs.
//!
//! Each command's attribute block is a `#[repr(C)]` prefix of the kernel's `union
//! bpf_attr` (linux/bpf.h); the kernel zero-fills whatever lies past the size passed.

pub mod asm;
pub mod btf;

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_MAP_DELETE_ELEM: libc::c_int = 3;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_PROG_GET_FD_BY_ID: libc::c_int = 13;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_int = 15;
const BPF_LINK_CREATE: libc::c_int = 28;
const BPF_PROG_TEST_RUN: libc::c_int = 10;

pub const BPF_MAP_TYPE_HASH: u32 = 1;
pub const BPF_MAP_TYPE_ARRAY: u32 = 2;
pub const BPF_MAP_TYPE_XSKMAP: u32 = 17;
pub const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
pub const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: BPF_XDP.
const BPF_XDP: u32 = 37;
/// `BPF_ANY`: create or replace a map element.
const BPF_ANY: u64 = 0;

/// `XDP_FLAGS_SKB_MODE` (generic XDP) and `XDP_FLAGS_DRV_MODE` (native, in the driver),
/// from linux/if_link.h.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
}

#[repr(C)]
#[derive(Default)]
struct GetFdByIdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct ObjInfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The head of `struct bpf_prog_info`, up to and including the name.
#[repr(C)]
#[derive(Default)]
struct ProgInfoHead {
    prog_type: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    load_time: u64,
    created_by_uid: u32,
    nr_map_ids: u32,
    map_ids: u64,
    name: [u8; 16],
}

/// Calls bpf(2) with `attr` as the attribute block; returns the non-negative result.
fn sys_bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live #[repr(C)] block of size_of::<T>() bytes, the size
    // passed. The pointers inside it (keys, values, instructions, licence, log and info
    // buffers) are set by this module's callers to buffers that are live for the call
    // and as large as the block says (see `map_update` for the one invariant the type
    // system does not check).
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd_result(r: libc::c_long) -> OwnedFd {
    // SAFETY: bpf(2) returned a new file descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(r as libc::c_int) }
}

fn object_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let n = name.len().min(15);
    out[..n].copy_from_slice(&name.as_bytes()[..n]);
    out
}

/// Creates a map; returns its file descriptor.
pub fn map_create(
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut a = MapCreateAttr {
        map_type,
        key_size,
        value_size,
        max_entries,
        map_name: object_name(name),
        ..Default::default()
    };
    sys_bpf(BPF_MAP_CREATE, &mut a).map(fd_result)
}

/// Sets `map[key] = value` (create or replace).
///
/// # Safety
/// `K` and `V` must be exactly as large as the map's key and value: the kernel reads
/// that many bytes from each.
pub unsafe fn map_update<K, V>(map: &OwnedFd, key: &K, value: &V) -> io::Result<()> {
    let mut a = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key as *const K as u64,
        value: value as *const V as u64,
        flags: BPF_ANY,
        ..Default::default()
    };
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// Sets `map[key]` to the bytes of `value` (create or replace).
///
/// # Safety
/// `K` must be exactly as large as the map's key, and `value` exactly as long as its
/// value: the kernel reads that many bytes from each.
pub unsafe fn map_update_bytes<K>(map: &OwnedFd, key: &K, value: &[u8]) -> io::Result<()> {
    let mut a = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key as *const K as u64,
        value: value.as_ptr() as u64,
        flags: BPF_ANY,
        ..Default::default()
    };
    sys_bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

/// Removes `map[key]`.
///
/// # Safety
/// `K` must be exactly as large as the map's key.
pub unsafe fn map_delete<K>(map: &OwnedFd, key: &K) -> io::Result<()> {
    let mut a = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: key as *const K as u64,
        ..Default::default()
    };
    sys_bpf(BPF_MAP_DELETE_ELEM, &mut a).map(|_| ())
}

/// Why a program did not load: the system's error and the verifier's log.
#[derive(Debug)]
pub struct LoadError {
    pub error: io::Error,
    pub log: String,
}

/// Loads an XDP program of encoded instructions (8 bytes each) named `name`.
pub fn prog_load_xdp(insns: &[u64], name: &str) -> Result<OwnedFd, LoadError> {
    prog_load(BPF_PROG_TYPE_XDP, BPF_XDP, insns, name, (0, 0))
}

/// `BPF_F_XDP_DEV_BOUND_ONLY`: the program is bound to one device (its driver's kfuncs,
/// such as reading a received frame's metadata, become callable).
const BPF_F_XDP_DEV_BOUND_ONLY: u32 = 1 << 6;

/// Loads an XDP program bound to interface `ifindex`: it may call the driver's
/// metadata kfuncs, and attaches to that interface only, in native mode.
pub fn prog_load_xdp_bound(insns: &[u64], name: &str, ifindex: u32) -> Result<OwnedFd, LoadError> {
    prog_load(
        BPF_PROG_TYPE_XDP,
        BPF_XDP,
        insns,
        name,
        (BPF_F_XDP_DEV_BOUND_ONLY, ifindex),
    )
}

/// Loads a socket filter program (as `PACKET_FANOUT_EBPF` runs) named `name`.
pub fn prog_load_socket_filter(insns: &[u64], name: &str) -> Result<OwnedFd, LoadError> {
    prog_load(BPF_PROG_TYPE_SOCKET_FILTER, 0, insns, name, (0, 0))
}

/// Loads a program of type `prog_type` of encoded instructions (8 bytes each), with
/// `prog_flags` and `prog_ifindex` as `bound` gives them.
///
/// The first attempt runs without a log (the verifier is quicker so); on failure the
/// load is repeated with a verifier log, which the error carries.
fn prog_load(
    prog_type: u32,
    expected_attach_type: u32,
    insns: &[u64],
    name: &str,
    bound: (u32, u32),
) -> Result<OwnedFd, LoadError> {
    let license = c"GPL";
    let attempt = |log: Option<&mut Vec<u8>>| {
        let mut a = ProgLoadAttr {
            prog_type,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            prog_name: object_name(name),
            expected_attach_type,
            prog_flags: bound.0,
            prog_ifindex: bound.1,
            ..Default::default()
        };
        if let Some(buf) = log {
            a.log_level = 1;
            a.log_size = buf.len() as u32;
            a.log_buf = buf.as_mut_ptr() as u64;
        }
        sys_bpf(BPF_PROG_LOAD, &mut a).map(fd_result)
    };
    match attempt(None) {
        Ok(fd) => Ok(fd),
        Err(first) => {
            let mut buf = vec![0u8; 1 << 16];
            match attempt(Some(&mut buf)) {
                Ok(fd) => Ok(fd),
                Err(error) => {
                    let log = CStr::from_bytes_until_nul(&buf)
                        .map(|c| c.to_string_lossy().trim_end().to_string())
                        .unwrap_or_default();
                    let error = if error.raw_os_error() == first.raw_os_error() {
                        first
                    } else {
                        error
                    };
                    Err(LoadError { error, log })
                }
            }
        }
    }
}

/// Attaches XDP program `prog` to interface `ifindex` through a bpf_link, in the mode
/// `mode_flags` ([`XDP_FLAGS_DRV_MODE`] or [`XDP_FLAGS_SKB_MODE`]). The program stays
/// attached while the returned link descriptor is open: the kernel detaches it when
/// the descriptor is closed, also when the process dies.
pub fn link_create_xdp(prog: &OwnedFd, ifindex: u32, mode_flags: u32) -> io::Result<OwnedFd> {
    let mut a = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags: mode_flags,
    };
    sys_bpf(BPF_LINK_CREATE, &mut a).map(fd_result)
}

/// Runs `prog` `repeat` times on a copy of `frame` in the kernel (`BPF_PROG_TEST_RUN`):
/// its return value and the mean time of a run in nanoseconds, as the kernel measured
/// it.
pub fn prog_test_run(prog: &OwnedFd, frame: &[u8], repeat: u32) -> io::Result<(u32, u32)> {
    let mut a = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_in: frame.as_ptr() as u64,
        repeat,
        ..Default::default()
    };
    sys_bpf(BPF_PROG_TEST_RUN, &mut a)?;
    Ok((a.retval, a.duration))
}

/// The name of the loaded program with id `id` (as given when it was loaded, up to 15
/// bytes).
pub fn prog_name_by_id(id: u32) -> io::Result<String> {
    let mut a = GetFdByIdAttr {
        id,
        ..Default::default()
    };
    let fd = sys_bpf(BPF_PROG_GET_FD_BY_ID, &mut a).map(fd_result)?;
    let mut info = ProgInfoHead::default();
    let mut a = ObjInfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: std::mem::size_of::<ProgInfoHead>() as u32,
        info: &mut info as *mut ProgInfoHead as u64,
    };
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a)?;
    let name = CStr::from_bytes_until_nul(&info.name)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(&info.name).into_owned());
    Ok(name)
}
