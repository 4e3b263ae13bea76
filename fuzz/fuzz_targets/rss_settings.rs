//! The RSS settings' text forms, written through a control socket by anyone allowed to
//! connect: flow rules, indirection tables and keys parse or are refused with a reason,
//! never panic, and whatever parses reads back as itself.
#![no_main]

use classify::rss::{format_key, format_rules, parse_key, parse_rules, rule_queue};
use classify::Reta;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&queues, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    if let Ok(rules) = parse_rules(text) {
        assert_eq!(parse_rules(&format_rules(&rules)).as_ref(), Ok(&rules));
        // The rules judge the text's own bytes as a frame without panicking.
        let _ = rule_queue(&rules, text.as_bytes());
    }
    let queues = usize::from(queues % 8) + 1;
    if let Ok(reta) = Reta::parse(text, queues) {
        assert!(reta.entries().iter().all(|&q| usize::from(q) < queues));
        assert_eq!(Reta::parse(&reta.to_list(), queues).as_ref(), Ok(&reta));
    }
    if let Ok(key) = parse_key(text) {
        assert_eq!(parse_key(&format_key(&key)), Ok(key));
    }
});
