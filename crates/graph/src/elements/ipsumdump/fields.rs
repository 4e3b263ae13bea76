//! The field table both elements share: Click's field names, their synonyms and the
//! order in which FromIPSummaryDump applies them (`elements/analysis/ipsumdump_*.cc`).

/// One field of an IP summary dump line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Field {
    Timestamp,
    TsSec,
    TsUsec,
    TsUsec1,
    Count,
    Paint,
    Link,
    Direction,
    Aggregate,
    WireLen,
    IpSrc,
    IpDst,
    IpTos,
    IpDscp,
    IpEcn,
    IpTtl,
    IpFrag,
    IpFragoff,
    IpId,
    IpSum,
    IpProto,
    IpHl,
    IpLen,
    IpCaptureLen,
    IpOpt,
    Sport,
    Dport,
    TcpSeq,
    TcpAck,
    TcpOff,
    TcpFlags,
    TcpWindow,
    TcpUrp,
    TcpOpt,
    TcpNtopt,
    TcpSack,
    UdpLen,
    IcmpType,
    IcmpCode,
    IcmpTypeName,
    PayloadLen,
    Payload,
}

use Field::*;

/// Every field with its canonical name, as the `!data` line writes it.
const NAMES: [(&str, Field); 42] = [
    ("timestamp", Timestamp),
    ("ts_sec", TsSec),
    ("ts_usec", TsUsec),
    ("ts_usec1", TsUsec1),
    ("count", Count),
    ("paint", Paint),
    ("link", Link),
    ("direction", Direction),
    ("aggregate", Aggregate),
    ("wire_len", WireLen),
    ("ip_src", IpSrc),
    ("ip_dst", IpDst),
    ("ip_tos", IpTos),
    ("ip_dscp", IpDscp),
    ("ip_ecn", IpEcn),
    ("ip_ttl", IpTtl),
    ("ip_frag", IpFrag),
    ("ip_fragoff", IpFragoff),
    ("ip_id", IpId),
    ("ip_sum", IpSum),
    ("ip_proto", IpProto),
    ("ip_hl", IpHl),
    ("ip_len", IpLen),
    ("ip_capture_len", IpCaptureLen),
    ("ip_opt", IpOpt),
    ("sport", Sport),
    ("dport", Dport),
    ("tcp_seq", TcpSeq),
    ("tcp_ack", TcpAck),
    ("tcp_off", TcpOff),
    ("tcp_flags", TcpFlags),
    ("tcp_window", TcpWindow),
    ("tcp_urp", TcpUrp),
    ("tcp_opt", TcpOpt),
    ("tcp_ntopt", TcpNtopt),
    ("tcp_sack", TcpSack),
    ("udp_len", UdpLen),
    ("icmp_type", IcmpType),
    ("icmp_code", IcmpCode),
    ("icmp_type_name", IcmpTypeName),
    ("payload_len", PayloadLen),
    ("payload", Payload),
];

/// Click's synonyms (looked up first, and may lead to another synonym).
const SYNONYMS: [(&str, &str); 15] = [
    ("length", "ip_len"),
    ("ip_p", "ip_proto"),
    ("tcp_seqno", "tcp_seq"),
    ("tcp_ackno", "tcp_ack"),
    ("tcp_win", "tcp_window"),
    ("utimestamp", "timestamp"),
    ("ts", "utimestamp"),
    ("sec", "ts_sec"),
    ("usec", "ts_usec"),
    ("usec1", "ts_usec1"),
    ("pkt_count", "count"),
    ("packet_count", "count"),
    ("agg", "aggregate"),
    ("wire_length", "wire_len"),
    ("payload_length", "payload_len"),
];

impl Field {
    /// The field called `name`, as Click's `FieldWriter::find`: a synonym, a field,
    /// or else the name with its first space made an underscore (`"ip src"`), or, for
    /// a name without underscore, prefixed with `ip_` (`src`, `len`, `proto`).
    pub(crate) fn find(name: &str) -> Option<Field> {
        // Each step either ends or makes the name longer by a bounded amount
        // (`ip_` once: the result holds an underscore), so the recursion is short.
        if let Some((_, to)) = SYNONYMS.iter().find(|(from, _)| *from == name) {
            return Field::find(to);
        }
        if let Some((_, f)) = NAMES.iter().find(|(n, _)| *n == name) {
            return Some(*f);
        }
        if let Some(i) = name.find(' ') {
            return Field::find(&format!("{}_{}", &name[..i], &name[i + 1..]));
        }
        if !name.contains('_') {
            return Field::find(&format!("ip_{}", name));
        }
        None
    }

    /// The canonical name (as written on the `!data` line).
    pub(crate) fn name(self) -> &'static str {
        NAMES.iter().find(|(_, f)| *f == self).map_or("none", |(n, _)| n)
    }

    /// When FromIPSummaryDump applies this field to the packet it builds (Click's
    /// `FieldReader::order`): annotations, then the IP header (fragment fields and
    /// the header length before the rest, the length and checksum after), then the
    /// transport header, then the payload. Fields of one order keep their column order.
    pub(crate) fn order(self) -> i32 {
        const ANNO: i32 = 100;
        const NET: i32 = 300;
        const TRANSP: i32 = 400;
        const PAYLOAD: i32 = 500;
        match self {
            Timestamp | TsSec | TsUsec | TsUsec1 | Count | Paint | Link | Direction | Aggregate | WireLen => {
                ANNO
            }
            IpFrag => NET - 2,
            IpFragoff | IpHl => NET - 1,
            IpLen => NET + 1,
            IpSum => NET + 2,
            IpSrc | IpDst | IpTos | IpDscp | IpEcn | IpTtl | IpId | IpProto | IpOpt => NET,
            IpCaptureLen => PAYLOAD + 2,
            TcpOff => TRANSP - 1,
            TcpSack => TRANSP + 1,
            TcpNtopt => TRANSP + 2,
            TcpOpt => TRANSP + 3,
            IcmpCode => TRANSP + 1,
            Sport | Dport | TcpSeq | TcpAck | TcpFlags | TcpWindow | TcpUrp | UdpLen | IcmpType
            | IcmpTypeName => TRANSP,
            Payload => PAYLOAD,
            PayloadLen => PAYLOAD + 1,
        }
    }
}

/// Parses a FIELDS/CONTENTS value: space-separated names, quoted where they hold a
/// space. `Err` names the first unknown one, in Click's words.
pub(crate) fn parse_list(text: &str) -> Result<Vec<Field>, String> {
    let mut out = Vec::new();
    for word in crate::args::split_words(text) {
        let name = crate::args::unquote(&word);
        match Field::find(&name) {
            Some(f) => out.push(f),
            None => return Err(format!("unknown content type '{}'", name)),
        }
    }
    if out.is_empty() {
        return Err("no contents specified".to_string());
    }
    Ok(out)
}

pub(crate) fn icmp_type_name(t: u8) -> Option<&'static str> {
    crate::elements::ip::icmperror::TYPE_NAMES
        .iter()
        .find(|(_, v)| *v == t)
        .map(|(n, _)| *n)
}

pub(crate) fn icmp_type_by_name(name: &str) -> Option<u8> {
    crate::elements::ip::icmperror::TYPE_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_synonyms_and_old_spellings_find_clicks_fields() {
        for (name, f) in NAMES {
            assert_eq!(Field::find(name), Some(f));
            assert_eq!(f.name(), name);
        }
        assert_eq!(Field::find("src"), Some(IpSrc));
        assert_eq!(Field::find("ip src"), Some(IpSrc));
        assert_eq!(Field::find("ts sec"), Some(TsSec));
        assert_eq!(Field::find("ts usec"), Some(TsUsec));
        assert_eq!(Field::find("ts"), Some(Timestamp));
        assert_eq!(Field::find("len"), Some(IpLen));
        assert_eq!(Field::find("length"), Some(IpLen));
        assert_eq!(Field::find("proto"), Some(IpProto));
        assert_eq!(Field::find("tcp seq"), Some(TcpSeq));
        assert_eq!(Field::find("payload len"), Some(PayloadLen));
        assert_eq!(Field::find("tcp_win"), Some(TcpWindow));
        assert_eq!(Field::find("agg"), Some(Aggregate));
        assert_eq!(Field::find("frag"), Some(IpFrag));
        assert_eq!(Field::find("bogus"), None);
        assert_eq!(Field::find("tcp bogus"), None);
        assert_eq!(Field::find(""), None);
    }

    #[test]
    fn lists_are_space_separated_with_quotes_and_name_the_unknown_field() {
        assert_eq!(
            parse_list("src dst 'tcp seq' \"payload len\"").unwrap(),
            vec![IpSrc, IpDst, TcpSeq, PayloadLen]
        );
        assert_eq!(parse_list("src frob").unwrap_err(), "unknown content type 'frob'");
        assert_eq!(parse_list("  ").unwrap_err(), "no contents specified");
    }
}
