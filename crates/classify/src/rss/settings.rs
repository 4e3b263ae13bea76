//! A port's RSS settings, the key and the indirection table, in the text forms an
//! operator writes and reads: ethtool's (`ethtool -X DEV equal N`, `weight W...`,
//! `hkey 6d:5a:...`) and a plain list of the table's 128 queues.

use super::{rule_queue, FlowRule, Reta, Toeplitz, MS_RSS_KEY, RETA_SIZE};

/// Bytes of an RSS key: enough for the longest hash input (an IPv6 4-tuple).
pub const KEY_LEN: usize = 40;

/// What a port that steers its own queues hashes with and where the hash sends a
/// frame, and the flow rules that send frames to a queue ahead of the hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RssSettings {
    pub key: [u8; KEY_LEN],
    pub reta: Reta,
    pub rules: Vec<FlowRule>,
}

impl RssSettings {
    /// Microsoft's key and a round-robin table over `queues` queues: what NIC drivers
    /// start with.
    pub fn new(queues: usize) -> RssSettings {
        RssSettings {
            key: MS_RSS_KEY,
            reta: Reta::new(queues),
            rules: Vec::new(),
        }
    }

    /// The hash function for [`RssSettings::key`].
    pub fn toeplitz(&self) -> Toeplitz {
        Toeplitz::new(&self.key)
    }

    /// The queue a frame goes to: the first flow rule's it matches, else the
    /// indirection table's entry for its hash (see [`Toeplitz::hash_frame`]).
    pub fn queue_for_frame(&self, frame: &[u8]) -> usize {
        rule_queue(&self.rules, frame)
            .unwrap_or_else(|| self.reta.queue_for(self.toeplitz().hash_frame(frame)))
    }

    /// The highest queue the table or a rule names.
    pub fn highest_queue(&self) -> usize {
        let table = self.reta.entries().iter().copied().max().unwrap_or(0);
        let rules = self.rules.iter().map(|r| r.queue).max().unwrap_or(0);
        usize::from(table.max(rules))
    }
}

/// The key as ethtool prints it: 40 bytes in hex, separated by colons.
pub fn format_key(key: &[u8; KEY_LEN]) -> String {
    key.iter()
        .map(|b| format!("{:02x}", b))
        .collect::<Vec<_>>()
        .join(":")
}

/// Reads a key written as ethtool's `hkey` takes it (40 two-digit hex bytes separated
/// by colons), or `default` for Microsoft's key.
pub fn parse_key(text: &str) -> Result<[u8; KEY_LEN], String> {
    let text = text.trim();
    if text == "default" {
        return Ok(MS_RSS_KEY);
    }
    let mut key = [0u8; KEY_LEN];
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() != KEY_LEN {
        return Err(format!(
            "an RSS key is {} bytes in hex separated by colons (6d:5a:56:...), or 'default'; got {} part{}",
            KEY_LEN,
            parts.len(),
            if parts.len() == 1 { "" } else { "s" }
        ));
    }
    for (i, (slot, part)) in key.iter_mut().zip(&parts).enumerate() {
        let ok = part.len() == 2 && part.bytes().all(|c| c.is_ascii_hexdigit());
        *slot = ok
            .then(|| u8::from_str_radix(part, 16).ok())
            .flatten()
            .ok_or_else(|| format!("RSS key byte {} is '{}', not two hex digits", i, part))?;
    }
    Ok(key)
}

impl Reta {
    /// The table as a list of its 128 queues, entry 0 first, separated by spaces: the
    /// form [`Reta::parse`] reads back.
    pub fn to_list(&self) -> String {
        self.entries()
            .iter()
            .map(|q| q.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Reads a table for a port of `queues` queues, in one of the forms:
    /// - `default`: round robin over every queue ([`Reta::new`]);
    /// - `equal N`: round robin over queues 0 to N-1, as `ethtool -X DEV equal N`;
    /// - `weight W0 W1 ...`: queue i gets entries in proportion to Wi (a weight of 0
    ///   gives none), as `ethtool -X DEV weight ...`;
    /// - 128 queue numbers, entry 0 first (what [`Reta::to_list`] writes).
    pub fn parse(text: &str, queues: usize) -> Result<Reta, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let number = |w: &str, what: &str| -> Result<usize, String> {
            w.parse::<usize>()
                .map_err(|_| format!("{} '{}' is not a non-negative integer", what, w))
        };
        let queue_in_range = |q: usize| -> Result<usize, String> {
            if q < queues.max(1) {
                Ok(q)
            } else {
                Err(format!(
                    "queue {} out of range (the port has {} queue{})",
                    q,
                    queues,
                    if queues == 1 { "" } else { "s" }
                ))
            }
        };
        let mut reta = Reta::new(queues);
        match words.as_slice() {
            [] => Err(no_form()),
            ["default"] => Ok(reta),
            ["equal", n] => {
                let n = number(n, "queue count")?;
                if n == 0 {
                    return Err("equal 0: spread over at least one queue".to_string());
                }
                queue_in_range(n - 1)
                    .map_err(|_| format!("equal {}: the port has {} queue{}", n, queues, plural(queues)))?;
                for i in 0..RETA_SIZE {
                    reta.set(i, i % n)?;
                }
                Ok(reta)
            }
            ["weight", ws @ ..] => {
                if ws.is_empty() {
                    return Err("weight: give a weight per queue (weight 1 1 2)".to_string());
                }
                if ws.len() > queues.max(1) {
                    return Err(format!(
                        "weight: {} weights for a port of {} queue{}",
                        ws.len(),
                        queues,
                        plural(queues)
                    ));
                }
                let weights = ws
                    .iter()
                    .map(|w| number(w, "weight"))
                    .collect::<Result<Vec<usize>, String>>()?;
                let total: usize = weights
                    .iter()
                    .try_fold(0usize, |a, &w| {
                        a.checked_add(w).filter(|&t| t <= u32::MAX as usize)
                    })
                    .ok_or("weight: the weights add up to more than 2^32 - 1")?;
                if total == 0 {
                    return Err("weight: at least one weight must be above 0".to_string());
                }
                // Entry i goes to the queue whose share of [0, total) holds i's point
                // i * total / 128, so queue q gets about 128 * Wq / total entries.
                let mut queue = 0;
                let mut upto = weights[0];
                for i in 0..RETA_SIZE {
                    let point = i * total / RETA_SIZE;
                    while point >= upto {
                        queue += 1;
                        upto += weights[queue];
                    }
                    reta.set(i, queue)?;
                }
                Ok(reta)
            }
            list if list.len() == RETA_SIZE => {
                for (i, w) in list.iter().enumerate() {
                    let q = number(w, &format!("entry {}", i))?;
                    queue_in_range(q).map_err(|e| format!("entry {}: {}", i, e))?;
                    reta.set(i, q)?;
                }
                Ok(reta)
            }
            list => {
                if list.iter().all(|w| w.parse::<usize>().is_ok()) {
                    Err(format!(
                        "a table lists {} queues, one per entry; got {}",
                        RETA_SIZE,
                        list.len()
                    ))
                } else {
                    Err(no_form())
                }
            }
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn no_form() -> String {
    format!(
        "an indirection table is 'default', 'equal N', 'weight W0 W1 ...' or {} queue numbers",
        RETA_SIZE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(r: &Reta, queues: usize) -> Vec<usize> {
        (0..queues)
            .map(|q| r.entries().iter().filter(|&&e| usize::from(e) == q).count())
            .collect()
    }

    #[test]
    fn equal_and_default() {
        let r = Reta::parse("equal 2", 4).unwrap();
        assert_eq!(counts(&r, 4), vec![64, 64, 0, 0]);
        assert_eq!(r.entries()[0..4], [0, 1, 0, 1]);
        assert_eq!(r.queues(), 4);
        assert_eq!(Reta::parse(" default ", 3).unwrap(), Reta::new(3));
        assert_eq!(Reta::parse("equal 1", 1).unwrap(), Reta::new(1));
        assert_eq!(
            Reta::parse("equal 5", 4).unwrap_err(),
            "equal 5: the port has 4 queues"
        );
        assert_eq!(
            Reta::parse("equal 0", 4).unwrap_err(),
            "equal 0: spread over at least one queue"
        );
        assert_eq!(
            Reta::parse("equal x", 4).unwrap_err(),
            "queue count 'x' is not a non-negative integer"
        );
    }

    #[test]
    fn weights_share_the_table_in_proportion() {
        // 1:1:2 over 128 entries: 32, 32, 64, in contiguous blocks as ethtool fills them.
        let r = Reta::parse("weight 1 1 2", 3).unwrap();
        assert_eq!(counts(&r, 3), vec![32, 32, 64]);
        assert_eq!(
            (r.entries()[31], r.entries()[32], r.entries()[63], r.entries()[64]),
            (0, 1, 1, 2)
        );
        // A zero weight gets nothing; later queues still get theirs.
        let r = Reta::parse("weight 0 3 1", 4).unwrap();
        assert_eq!(counts(&r, 4), vec![0, 96, 32, 0]);
        // Uneven: 1:2 is 43 and 85 (entry i to queue 0 while i * 3 / 128 < 1).
        let r = Reta::parse("weight 1 2", 2).unwrap();
        assert_eq!(counts(&r, 2), vec![43, 85]);
        assert_eq!(
            Reta::parse("weight 1 1 1", 2).unwrap_err(),
            "weight: 3 weights for a port of 2 queues"
        );
        assert_eq!(
            Reta::parse("weight 0 0", 2).unwrap_err(),
            "weight: at least one weight must be above 0"
        );
        assert_eq!(
            Reta::parse("weight", 2).unwrap_err(),
            "weight: give a weight per queue (weight 1 1 2)"
        );
    }

    #[test]
    fn full_lists_round_trip_and_are_checked() {
        let mut r = Reta::new(3);
        r.set(5, 2).unwrap();
        r.set(127, 0).unwrap();
        let text = r.to_list();
        assert_eq!(text.split(' ').count(), 128);
        assert!(text.starts_with("0 1 2 0 1 2 "));
        assert_eq!(Reta::parse(&text, 3).unwrap(), r);
        let bad = text.replacen("2", "3", 1);
        assert_eq!(
            Reta::parse(&bad, 3).unwrap_err(),
            "entry 2: queue 3 out of range (the port has 3 queues)"
        );
        assert_eq!(
            Reta::parse("0 1 0", 2).unwrap_err(),
            "a table lists 128 queues, one per entry; got 3"
        );
        assert_eq!(
            Reta::parse("spread evenly", 2).unwrap_err(),
            "an indirection table is 'default', 'equal N', 'weight W0 W1 ...' or 128 queue numbers"
        );
        assert_eq!(Reta::parse("", 2).unwrap_err(), no_form());
    }

    #[test]
    fn keys_in_ethtool_form() {
        let text = format_key(&MS_RSS_KEY);
        assert!(text.starts_with("6d:5a:56:da:25:5b:0e:c2"));
        assert_eq!(text.len(), 40 * 3 - 1);
        assert_eq!(parse_key(&text).unwrap(), MS_RSS_KEY);
        assert_eq!(parse_key("default").unwrap(), MS_RSS_KEY);
        let upper = text.to_uppercase();
        assert_eq!(parse_key(&upper).unwrap(), MS_RSS_KEY);
        assert_eq!(
            parse_key("6d:5a").unwrap_err(),
            "an RSS key is 40 bytes in hex separated by colons (6d:5a:56:...), or 'default'; got 2 parts"
        );
        let bad = text.replacen("5a", "5g", 1);
        assert_eq!(
            parse_key(&bad).unwrap_err(),
            "RSS key byte 1 is '5g', not two hex digits"
        );
        let short = text.replacen("5a", "5", 1);
        assert_eq!(
            parse_key(&short).unwrap_err(),
            "RSS key byte 1 is '5', not two hex digits"
        );
    }

    #[test]
    fn settings_pick_the_queue_through_key_and_table() {
        // Microsoft's first IPv4 TCP vector hashes to 0x51ccc178: entry 0x78 = 120.
        let mut s = RssSettings::new(4);
        let mut frame = vec![0u8; 14 + 20 + 8];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut frame[14..];
        ip[0] = 0x45;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[66, 9, 149, 187]);
        ip[16..20].copy_from_slice(&[161, 142, 100, 80]);
        ip[20..22].copy_from_slice(&2794u16.to_be_bytes());
        ip[22..24].copy_from_slice(&1766u16.to_be_bytes());
        assert_eq!(s.queue_for_frame(&frame), 120 % 4);
        s.reta.set(120, 3).unwrap();
        s.reta.set(0, 1).unwrap();
        assert_eq!(s.queue_for_frame(&frame), 3);
        // An all-zero key hashes everything to 0: entry 0.
        s.key = [0; KEY_LEN];
        assert_eq!(s.queue_for_frame(&frame), 1);
    }
}
