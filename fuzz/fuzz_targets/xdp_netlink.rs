//! The AF_XDP port's parser of the kernel's RTM_GETLINK replies (queue count and the
//! attached XDP program): arbitrary bytes must give a result or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = io::parse_link_reply(data);
});
