//! Handlers of `FromDevice` and `ToDevice` that reach the element's port, shared by
//! every element naming it: per-queue counts, and the RSS key and indirection table of
//! a port that spreads received frames over its queues itself (AF_PACKET with more
//! than one queue; see `io::Port::rss`).

use classify::rss::{format_key, parse_key};
use classify::Reta;
use graph::element::HandlerInfo;
use io::Port;

/// Which way the element moves packets: its `queue_counts` count that direction.
#[derive(Clone, Copy)]
pub(super) enum Direction {
    Receive,
    Transmit,
}

/// `queue_counts`, and `rss_key` and `rss_table` where the port has RSS settings.
pub(super) fn handlers(port: &dyn Port) -> Vec<HandlerInfo> {
    let mut h = vec![HandlerInfo::read("queue_counts")];
    if port.rss().is_ok() {
        h.push(HandlerInfo::read_write("rss_key"));
        h.push(HandlerInfo::read_write("rss_table"));
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
        "rss_key" => port.rss().ok().map(|s| format_key(&s.key)),
        "rss_table" => port.rss().ok().map(|s| s.reta.to_list()),
        _ => None,
    }
}

pub(super) fn write(port: &dyn Port, name: &str, value: &str) -> Option<Result<(), String>> {
    if name != "rss_key" && name != "rss_table" {
        return None;
    }
    let mut settings = port.rss().ok()?;
    Some((|| {
        if name == "rss_key" {
            settings.key = parse_key(value)?;
        } else {
            settings.reta = Reta::parse(value, port.queues())?;
        }
        port.set_rss(&settings)
    })())
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
        fn set_rss(&self, s: &RssSettings) -> Result<(), String> {
            *self.0.lock().unwrap() = s.clone();
            Ok(())
        }
    }

    #[test]
    fn counts_per_queue_in_the_element_direction() {
        let p = Steered(Mutex::new(RssSettings::new(3)));
        assert_eq!(read(&p, Direction::Receive, "queue_counts").unwrap(), "10 11 12");
        assert_eq!(read(&p, Direction::Transmit, "queue_counts").unwrap(), "20 21 22");
        let names: Vec<&str> = handlers(&p).iter().map(|h| h.name).collect();
        assert_eq!(names, ["queue_counts", "rss_key", "rss_table"]);
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
