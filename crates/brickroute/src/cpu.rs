//! The CPU features the binary was built for, checked when it starts.
//!
//! The workspace builds for x86-64-v3 (`.cargo/config.toml`), so the compiler may use
//! AVX2, BMI2, POPCNT and the rest anywhere. On an older CPU such a binary would die of an
//! illegal instruction wherever the first one runs; this check names what is missing
//! instead. A build for another target checks the features that target assumes.

/// An x86-64 feature a build may assume: its name in `target_feature`, its flag in
/// `/proc/cpuinfo`, and whether this CPU (with the OS's support, for the AVX family)
/// has it.
#[cfg(target_arch = "x86_64")]
struct Feature {
    name: &'static str,
    #[cfg_attr(not(test), allow(dead_code))]
    cpuinfo: &'static str,
    built_for: bool,
    present: bool,
}

#[cfg(target_arch = "x86_64")]
fn features() -> Vec<Feature> {
    use std::arch::x86_64::{__cpuid_count, CpuidResult};
    // A leaf the CPU does not have reads as all zero.
    const NONE: CpuidResult = CpuidResult {
        eax: 0,
        ebx: 0,
        ecx: 0,
        edx: 0,
    };
    let bit = |word: u32, n: u32| word & (1 << n) != 0;
    let leaf1 = __cpuid_count(1, 0);
    let leaf7 = if __cpuid_count(0, 0).eax >= 7 {
        __cpuid_count(7, 0)
    } else {
        NONE
    };
    let ext1 = if __cpuid_count(0x8000_0000, 0).eax >= 0x8000_0001 {
        __cpuid_count(0x8000_0001, 0)
    } else {
        NONE
    };
    // AVX registers are usable only if the OS saves them (OSXSAVE, then XCR0's SSE and
    // AVX state bits).
    let os_avx = bit(leaf1.ecx, 27) && xcr0() & 0b110 == 0b110;
    // (`/proc/cpuinfo` calls SSE3 "pni" and LZCNT "abm". scripts/cpu-target.sh checks
    // the same flags before building.)
    #[rustfmt::skip]
    let table = [
        ("sse3",       "pni",    cfg!(target_feature = "sse3"),       bit(leaf1.ecx, 0)),
        ("ssse3",      "ssse3",  cfg!(target_feature = "ssse3"),      bit(leaf1.ecx, 9)),
        ("fma",        "fma",    cfg!(target_feature = "fma"),        bit(leaf1.ecx, 12) && os_avx),
        ("cmpxchg16b", "cx16",   cfg!(target_feature = "cmpxchg16b"), bit(leaf1.ecx, 13)),
        ("sse4.1",     "sse4_1", cfg!(target_feature = "sse4.1"),     bit(leaf1.ecx, 19)),
        ("sse4.2",     "sse4_2", cfg!(target_feature = "sse4.2"),     bit(leaf1.ecx, 20)),
        ("movbe",      "movbe",  cfg!(target_feature = "movbe"),      bit(leaf1.ecx, 22)),
        ("popcnt",     "popcnt", cfg!(target_feature = "popcnt"),     bit(leaf1.ecx, 23)),
        ("avx",        "avx",    cfg!(target_feature = "avx"),        bit(leaf1.ecx, 28) && os_avx),
        ("f16c",       "f16c",   cfg!(target_feature = "f16c"),       bit(leaf1.ecx, 29) && os_avx),
        ("bmi1",       "bmi1",   cfg!(target_feature = "bmi1"),       bit(leaf7.ebx, 3)),
        ("avx2",       "avx2",   cfg!(target_feature = "avx2"),       bit(leaf7.ebx, 5) && os_avx),
        ("bmi2",       "bmi2",   cfg!(target_feature = "bmi2"),       bit(leaf7.ebx, 8)),
        ("lzcnt",      "abm",    cfg!(target_feature = "lzcnt"),      bit(ext1.ecx, 5)),
    ];
    table
        .into_iter()
        .map(|(name, cpuinfo, built_for, present)| Feature {
            name,
            cpuinfo,
            built_for,
            present,
        })
        .collect()
}

/// The OS's XCR0 register (which register states it saves), or 0 without OSXSAVE.
#[cfg(target_arch = "x86_64")]
fn xcr0() -> u64 {
    #[target_feature(enable = "xsave")]
    unsafe fn read() -> u64 {
        std::arch::x86_64::_xgetbv(0)
    }
    if std::arch::x86_64::__cpuid_count(1, 0).ecx & (1 << 27) == 0 {
        return 0;
    }
    // SAFETY: OSXSAVE (checked just above) means the OS has enabled XGETBV.
    unsafe { read() }
}

/// The features this build assumes that this CPU lacks, by name.
pub fn missing() -> Vec<&'static str> {
    #[cfg(target_arch = "x86_64")]
    return features()
        .into_iter()
        .filter(|f| f.built_for && !f.present)
        .map(|f| f.name)
        .collect();
    #[cfg(not(target_arch = "x86_64"))]
    Vec::new()
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// Every feature's CPUID answer is what the kernel says of this CPU, so the bits
    /// read are the right ones.
    #[test]
    fn cpuid_answers_match_the_kernels_flags() {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
        let flags: Vec<&str> = cpuinfo
            .lines()
            .find(|l| l.starts_with("flags"))
            .expect("a flags line")
            .split_whitespace()
            .collect();
        for f in features() {
            assert_eq!(
                f.present,
                flags.contains(&f.cpuinfo),
                "{} ({})",
                f.name,
                f.cpuinfo
            );
        }
    }

    /// The test binary runs, so this CPU has what the build assumes, and the check must
    /// agree; and a build for x86-64-v3 assumes each of v3's features.
    #[test]
    fn this_cpu_has_what_the_build_assumes() {
        assert_eq!(missing(), Vec::<&str>::new());
        if cfg!(target_feature = "avx2") {
            let built: Vec<&str> = features()
                .iter()
                .filter(|f| f.built_for)
                .map(|f| f.name)
                .collect();
            assert_eq!(built.len(), 14, "{built:?}");
        }
    }
}
