//! Just enough of BTF, the kernel's type format, to find a kernel function's type id in
//! `/sys/kernel/btf/vmlinux`: a BPF program calls a kfunc by that id.
//!
//! The layout is linux/btf.h's: a header, then a type section of variable-length
//! records (type ids count from 1 in their order) and a string section.

use std::path::Path;

const MAGIC: u16 = 0xeb9f;
const KIND_FUNC: u32 = 12;

/// The kernel's own types.
pub const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

/// The type id of the function named `name` in the BTF at `path`; `None` if the file
/// cannot be read, is not BTF, or has no such function.
pub fn function_id(path: impl AsRef<Path>, name: &str) -> Option<u32> {
    let data = std::fs::read(path).ok()?;
    find_function(&data, name)
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    let b = d.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// The NUL-terminated string at `at` of the string section `strings`.
fn string_at(strings: &[u8], at: usize) -> Option<&[u8]> {
    let s = strings.get(at..)?;
    Some(&s[..s.iter().position(|&c| c == 0)?])
}

/// Bytes that follow a type record of `kind` with `vlen` entries (linux/btf.h).
fn extra_bytes(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        // INT, VAR, DECL_TAG: one u32.
        1 | 14 | 17 => 4,
        // ARRAY: struct btf_array.
        3 => 12,
        // STRUCT, UNION: btf_member; DATASEC: btf_var_secinfo; ENUM64: btf_enum64.
        4 | 5 | 15 | 19 => 12 * vlen,
        // ENUM: btf_enum; FUNC_PROTO: btf_param.
        6 | 13 => 8 * vlen,
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG.
        2 | 7..=12 | 16 | 18 => 0,
        _ => return None,
    })
}

/// [`function_id`] over BTF bytes in the host's byte order. Reads only within `data`.
pub fn find_function(data: &[u8], name: &str) -> Option<u32> {
    if data.len() < 24 || u16::from_ne_bytes([data[0], data[1]]) != MAGIC {
        return None;
    }
    let hdr_len = u32_at(data, 4)? as usize;
    let (type_off, type_len) = (u32_at(data, 8)? as usize, u32_at(data, 12)? as usize);
    let (str_off, str_len) = (u32_at(data, 16)? as usize, u32_at(data, 20)? as usize);
    let types_start = hdr_len.checked_add(type_off)?;
    let types = data.get(types_start..types_start.checked_add(type_len)?)?;
    let strings_start = hdr_len.checked_add(str_off)?;
    let strings = data.get(strings_start..strings_start.checked_add(str_len)?)?;
    let mut at = 0usize;
    let mut id = 1u32;
    while at < types.len() {
        let name_off = u32_at(types, at)? as usize;
        let info = u32_at(types, at + 4)?;
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        if kind == KIND_FUNC && string_at(strings, name_off) == Some(name.as_bytes()) {
            return Some(id);
        }
        at = at.checked_add(12 + extra_bytes(kind, vlen)?)?;
        id = id.checked_add(1)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// BTF with: 1 INT "int", 2 FUNC_PROTO (two params), 3 FUNC "f", 4 STRUCT "s"
    /// (one member), 5 FUNC "g".
    fn sample() -> Vec<u8> {
        let strings = b"\0int\0f\0s\0g\0m\0".to_vec();
        let mut types = Vec::new();
        let mut record = |name: u32, kind: u32, vlen: u32, size_or_type: u32, extra: &[u32]| {
            for w in [name, (kind << 24) | vlen, size_or_type].iter().chain(extra) {
                types.extend_from_slice(&w.to_ne_bytes());
            }
        };
        record(1, 1, 0, 4, &[32]);
        record(0, 13, 2, 1, &[0, 1, 0, 1]);
        record(5, 12, 0, 2, &[]);
        record(7, 4, 1, 4, &[11, 1, 0]);
        record(9, 12, 0, 2, &[]);
        let mut d = Vec::new();
        d.extend_from_slice(&MAGIC.to_ne_bytes());
        d.extend_from_slice(&[1, 0]);
        for w in [
            24u32,
            0,
            types.len() as u32,
            types.len() as u32,
            strings.len() as u32,
        ] {
            d.extend_from_slice(&w.to_ne_bytes());
        }
        d.extend_from_slice(&types);
        d.extend_from_slice(&strings);
        d
    }

    #[test]
    fn functions_are_found_by_name_past_records_of_every_size() {
        let d = sample();
        assert_eq!(find_function(&d, "f"), Some(3));
        assert_eq!(find_function(&d, "g"), Some(5));
        // A struct of that name is not a function; nor is a missing name.
        assert_eq!(find_function(&d, "s"), None);
        assert_eq!(find_function(&d, "h"), None);
    }

    #[test]
    fn damaged_btf_gives_nothing_and_never_panics() {
        let d = sample();
        for n in 0..d.len() {
            let _ = find_function(&d[..n], "g");
        }
        let mut bad = d.clone();
        bad[0] ^= 1;
        assert_eq!(find_function(&bad, "f"), None);
        let mut huge = d;
        huge[12..16].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(find_function(&huge, "f"), None);
    }

    #[test]
    fn the_running_kernels_functions_are_found() {
        // Where the kernel has no BTF there is nothing to read.
        if !Path::new(VMLINUX).exists() {
            return;
        }
        let id = function_id(VMLINUX, "schedule").expect("the kernel's BTF names schedule()");
        assert!(id > 1);
        assert_eq!(function_id(VMLINUX, "no_such_function_anywhere"), None);
    }
}
