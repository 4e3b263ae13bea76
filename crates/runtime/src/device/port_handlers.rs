//! Handlers of `FromDevice` and `ToDevice` that reach the element's port, shared by
//! every element naming it: per-queue counts, and the RSS key, indirection table and
//! flow rules of a port that spreads received frames over its queues itself
//! (AF_PACKET with more than one queue; see `io::Port::rss`).

use classify::rss::{format_key, format_rules, parse_key, parse_rules};
use classify::Reta;
use graph::element::HandlerInfo;
use io::Port;

/// Which way the element moves packets: its `queue_counts` count that direction.
#[derive(Clone, Copy)]
pub(super) enum Direction {
    Receive,
    Transmit,
}

const RSS_HANDLERS: [&str; 3] = ["rss_key", "rss_table", "rss_rules"];

/// Whether the port spreads frames over more than one queue by settings of its own.
fn steers(port: &dyn Port) -> bool {
    port.queues() > 1 && port.rss().is_ok()
}

/// `queue_counts`, and the RSS handlers where the port steers its queues.
pub(super) fn handlers(port: &dyn Port) -> Vec<HandlerInfo> {
    let mut h = vec![HandlerInfo::read("queue_counts")];
    if steers(port) {
        h.extend(RSS_HANDLERS.map(HandlerInfo::read_write));
    }
    h
}

pub(super) fn read(port: &dyn Port, direction: Direction, name: &str) -> Option<String> {
    match name {
        "queue_counts" => Some(
            (0..port.queues())
                .map(|q| {
                    let s = port.stats(q);
                    match direction {
                        Direction::Receive => s.rx_packets,
                        Direction::Transmit => s.tx_packets,
                    }
                    .to_string()
                })
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "rss_key" | "rss_table" | "rss_rules" if steers(port) => port.rss().ok().map(|s| match name {
            "rss_key" => format_key(&s.key),
            "rss_table" => s.reta.to_list(),
            _ => format_rules(&s.rules),
        }),
        _ => None,
    }
}

/// Writes one part of the settings; the port applies it under its lock, so writes of
/// other parts through other elements at the same time are kept.
pub(super) fn write(port: &dyn Port, name: &str, value: &str) -> Option<Result<(), String>> {
    if !RSS_HANDLERS.contains(&name) || !steers(port) {
        return None;
    }
    let queues = port.queues();
    Some(port.update_rss(&mut |s| {
        match name {
            "rss_key" => s.key = parse_key(value)?,
            "rss_table" => s.reta = Reta::parse(value, queues)?,
            _ => s.rules = parse_rules(value)?,
        }
        Ok(())
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use classify::RssSettings;
    use io::QueueStats;
    use packet::PacketBatch;
    use std::sync::Mutex;

    /// A port of three queues with RSS settings and fixed counts.
    struct Steered(Mutex<RssSettings>);

    impl Port for Steered {
        fn queues(&self) -> usize {
            3
        }
        fn rx_burst(&self, _: usize, _: &mut PacketBatch, _: usize) -> usize {
            0
        }
        fn rx_finished(&self, _: usize) -> bool {
            false
        }
        fn tx_burst(&self, _: usize, batch: &mut PacketBatch) -> usize {
            batch.clear();
            0
        }
        fn stats(&self, q: usize) -> QueueStats {
            QueueStats {
                rx_packets: 10 + q as u64,
                tx_packets: 20 + q as u64,
                ..QueueStats::default()
            }
        }
        fn rss(&self) -> Result<RssSettings, String> {
            Ok(self.0.lock().unwrap().clone())
        }
        fn update_rss(
            &self,
            change: &mut dyn FnMut(&mut RssSettings) -> Result<(), String>,
        ) -> Result<(), String> {
            let mut s = self.0.lock().unwrap();
            let mut new = s.clone();
            change(&mut new)?;
            *s = new;
            Ok(())
        }
    }

    #[test]
    fn counts_per_queue_in_the_element_direction() {
        let p = Steered(Mutex::new(RssSettings::new(3)));
        assert_eq!(read(&p, Direction::Receive, "queue_counts").unwrap(), "10 11 12");
        assert_eq!(read(&p, Direction::Transmit, "queue_counts").unwrap(), "20 21 22");
        let names: Vec<&str> = handlers(&p).iter().map(|h| h.name).collect();
        assert_eq!(names, ["queue_counts", "rss_key", "rss_table", "rss_rules"]);
    }

    #[test]
    fn table_and_key_written_in_operator_forms() {
        let p = Steered(Mutex::new(RssSettings::new(3)));
        write(&p, "rss_table", "equal 2").unwrap().unwrap();
        let table = read(&p, Direction::Receive, "rss_table").unwrap();
        assert!(table.starts_with("0 1 0 1 "), "{}", table);
        assert_eq!(
            write(&p, "rss_table", "equal 4").unwrap().unwrap_err(),
            "equal 4: the port has 3 queues"
        );
        let key = vec!["01"; 40].join(":");
        write(&p, "rss_key", &key).unwrap().unwrap();
        assert_eq!(read(&p, Direction::Receive, "rss_key").unwrap(), key);
        // A refused key leaves the table written before.
        assert!(write(&p, "rss_key", "01:02").unwrap().is_err());
        assert_eq!(p.rss().unwrap().key, [1; 40]);
        assert!(p.rss().unwrap().reta.entries().starts_with(&[0, 1, 0, 1]));
        assert!(write(&p, "count", "1").is_none());
        // Rules, one a line or separated by semicolons; read back one a line.
        write(&p, "rss_rules", "tcp dport 179 queue 0; dst 10.0.0.0/8 queue 2")
            .unwrap()
            .unwrap();
        assert_eq!(
            read(&p, Direction::Receive, "rss_rules").unwrap(),
            "tcp dport 179 queue 0\ndst 10.0.0.0/8 queue 2\n"
        );
        assert_eq!(
            write(&p, "rss_rules", "tcp queue").unwrap().unwrap_err(),
            "rule 1: 'queue' needs a value"
        );
        assert_eq!(p.rss().unwrap().rules.len(), 2);
        write(&p, "rss_rules", "").unwrap().unwrap();
        assert_eq!(read(&p, Direction::Receive, "rss_rules").unwrap(), "");
    }

    #[test]
    fn ports_without_settings_have_no_rss_handlers() {
        let p = io::MemPort::new(2);
        let names: Vec<&str> = handlers(&p).iter().map(|h| h.name).collect();
        assert_eq!(names, ["queue_counts"]);
        assert_eq!(read(&p, Direction::Receive, "rss_table"), None);
        assert!(write(&p, "rss_table", "default").is_none());
    }
}
