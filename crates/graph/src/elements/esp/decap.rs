//! `ESPDecap(SPI, KEY [, ESN, REPLAY])`: IPsec ESP tunnel-mode decapsulation with
//! AES-GCM (RFC 4303, RFC 4106), the receiving end of an `ESPEncap` or of any
//! `rfc4106(gcm(aes))` tunnel-mode association with a 16-byte ICV.
//!
//! Each packet is an IPv4 or IPv6 datagram carrying ESP (from its first byte; under
//! IPv6, ESP right after the fixed header, no extension headers). A packet of
//! the association's SPI whose sequence number the anti-replay window allows is
//! authenticated and decrypted, and leaves on output 0 as the inner IPv4 or IPv6
//! packet, with its network header and destination annotation set. Packets refused
//! before decryption (not ESP, a fragment, too short, another SPI, a replayed or
//! too old sequence number) leave on output 1 unchanged if it is connected, else
//! are dropped. Packets that fail authentication are dropped (their bytes are no
//! longer the ones received) and leave the window as it was; authentic packets whose
//! decrypted trailer is wrong, and dummy packets (next header 59), are dropped with
//! their sequence numbers used up. Each kind is counted. An outer Congestion
//! Experienced mark is carried to an ECN-capable inner packet (RFC 6040).

use super::replay::{Replay, Stale, MAX_WINDOW};
use super::*;
use crate::args::Args;
use crate::element::*;
use crate::error::ConfigError;
use packet::{Packet, PacketBatch};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub struct ESPDecapClass;

/// The anti-replay window unless REPLAY says otherwise (strongSwan's is 32, `ip xfrm
/// state`'s 0, no check; a router spreading one association over several cores
/// reorders more).
const DEFAULT_WINDOW: u64 = 128;

impl ElementClass for ESPDecapClass {
    fn name(&self) -> &'static str {
        "ESPDecap"
    }
    fn port_count(&self) -> PortCount {
        PortCount::parse("1/1-2")
    }
    fn build(&self, args: &mut Args, cx: &BuildContext) -> Result<Arc<dyn ElementSpec>, ConfigError> {
        let e = |m: String| cx.error(m);
        let spi = args.required::<u32>("SPI").map_err(e)?;
        let key = args.required::<KeyArg>("KEY").map_err(e)?;
        let esn = args.keyword::<bool>("ESN").map_err(e)?.unwrap_or(false);
        let window = args
            .keyword::<u64>("REPLAY")
            .map_err(e)?
            .unwrap_or(DEFAULT_WINDOW);
        args.finish().map_err(e)?;
        if window > MAX_WINDOW {
            return Err(cx.error(format!("REPLAY must be at most {MAX_WINDOW}")));
        }
        if esn && window == 0 {
            return Err(cx.error(
                "ESN needs a REPLAY window (the high half of each sequence number is found from it)",
            ));
        }
        let sa = Sa::new(spi, &key, esn).map_err(e)?;
        Ok(Arc::new(ESPDecapSpec {
            shared: Arc::new(Shared::new(sa, Replay::new(window, esn))),
        }))
    }
}

/// What happened to packets, by kind.
#[derive(Default)]
struct Counts {
    bad: AtomicU64,
    auth_failures: AtomicU64,
    replays: AtomicU64,
    dummies: AtomicU64,
}

pub(super) struct Shared {
    sa: Sa,
    replay: Mutex<Replay>,
    counts: Counts,
}

struct ESPDecapSpec {
    shared: Arc<Shared>,
}

impl ElementSpec for ESPDecapSpec {
    fn instantiate(&self, _w: WorkerInfo) -> Box<dyn Element> {
        Box::new(ESPDecap::new(self.shared.clone()))
    }
    fn handlers(&self) -> Vec<HandlerInfo> {
        ["spi", "seq", "bad", "auth_failures", "replays", "dummies"]
            .into_iter()
            .map(HandlerInfo::read)
            .collect()
    }
    fn read_handler(&self, name: &str) -> Option<String> {
        let s = &self.shared;
        let c = &s.counts;
        let n = |a: &AtomicU64| Some(a.load(Ordering::Relaxed).to_string());
        match name {
            "spi" => Some(s.sa.spi.to_string()),
            "seq" => Some(s.window().top().to_string()),
            "bad" => n(&c.bad),
            "auth_failures" => n(&c.auth_failures),
            "replays" => n(&c.replays),
            "dummies" => n(&c.dummies),
            _ => None,
        }
    }

    fn state(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    /// The same association (SPI, key, ESN) goes on with the old element's
    /// anti-replay window, so a packet taken before the configuration changed is a
    /// replay after it; the counts go on too.
    fn take_state(&self, old: &dyn ElementSpec) -> bool {
        let Some(old) = state_of::<ESPDecapSpec>(old) else {
            return false;
        };
        let (s, o) = (&self.shared, &old.shared);
        if !s.sa.same(&o.sa) {
            return false;
        }
        s.window().go_on_from(&o.window());
        let (c, oc) = (&s.counts, &o.counts);
        for (mine, theirs) in [
            (&c.bad, &oc.bad),
            (&c.auth_failures, &oc.auth_failures),
            (&c.replays, &oc.replays),
            (&c.dummies, &oc.dummies),
        ] {
            mine.fetch_add(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        true
    }
}

/// A packet's fate, decided in steps over the batch.
#[derive(Clone, Copy)]
enum Verdict {
    /// Passed the checks before decryption: its whole sequence number, and where its
    /// parts lie.
    Checked(u64, Layout),
    /// Authentic and unwrapped, with this sequence number: output 0 once the window
    /// takes the number.
    Open(u64),
    /// Refused before decryption: output 1, unchanged.
    Refused,
    /// Authentic, with this sequence number, but not to be passed on (a dummy, or a
    /// wrong trailer): dropped, its number used up all the same (the window moves for
    /// every packet that authenticates, RFC 4303 3.4.3), and counted as what it is
    /// unless the window finds the number taken meanwhile (then as a replay).
    Consumed(u64, Discarded),
    /// Failed authentication, or replayed: dropped.
    Dropped,
}

/// Why an authentic packet is not passed on.
#[derive(Clone, Copy)]
enum Discarded {
    /// Next header 59 (RFC 4303 2.6).
    Dummy,
    /// A pad length beyond the payload, or a next header the element does not take or
    /// that does not match the inner packet's version.
    BadTrailer,
}

/// Where an ESP packet's parts lie: the outer header's length and the ESP packet's
/// end (the outer header's total length).
#[derive(Clone, Copy)]
struct Layout {
    /// The outer header's length, and where the packet ends.
    ihl: usize,
    end: usize,
    /// The outer header's ECN field.
    ecn: u8,
}

impl Shared {
    pub(super) fn new(sa: Sa, replay: Replay) -> Shared {
        Shared {
            sa,
            replay: Mutex::new(replay),
            counts: Counts::default(),
        }
    }

    pub(super) fn window(&self) -> std::sync::MutexGuard<'_, Replay> {
        // A worker that panicked while holding the window left it consistent (every
        // change is a plain store): go on with it.
        self.replay.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The outer header's layout if `d` is a whole, unfragmented IPv4 ESP packet, or
    /// an IPv6 packet whose fixed header is followed by ESP, of this association long
    /// enough to hold an ESP header, IV, trailer and ICV; its sequence number's low
    /// half.
    fn parse(&self, d: &[u8]) -> Option<(Layout, u32)> {
        let (ihl, end, ecn) = match d.first()? >> 4 {
            4 if d.len() >= OUTER_LEN && d[9] == PROTO_ESP => {
                let ihl = usize::from(d[0] & 15) * 4;
                let end = usize::from(u16::from_be_bytes([d[2], d[3]]));
                // MF set or a fragment offset: only a reassembled packet can be opened.
                if ihl < OUTER_LEN || u16::from_be_bytes([d[6], d[7]]) & 0x3fff != 0 {
                    return None;
                }
                (ihl, end, d[1] & ECN_MASK)
            }
            6 if d.len() >= OUTER6_LEN && d[6] == PROTO_ESP => {
                let payload = usize::from(u16::from_be_bytes([d[4], d[5]]));
                // (A jumbogram's payload length is 0: none comes this way.)
                (OUTER6_LEN, OUTER6_LEN + payload, (d[1] >> 4) & ECN_MASK)
            }
            _ => return None,
        };
        if end > d.len() {
            return None;
        }
        if end < ihl + ESP_HEADER + IV_LEN + TRAILER + ICV_LEN {
            return None;
        }
        let esp = &d[ihl..];
        if u32::from_be_bytes(esp[..4].try_into().ok()?) != self.sa.spi {
            return None;
        }
        Some((
            Layout { ihl, end, ecn },
            u32::from_be_bytes(esp[4..8].try_into().ok()?),
        ))
    }

    /// Authenticates and decrypts one packet laid out as [`Self::parse`] found it, and
    /// leaves the inner packet; the verdict.
    fn open(
        &self,
        p: &mut Packet,
        seq: u64,
        Layout {
            ihl,
            end,
            ecn: outer_ecn,
        }: Layout,
    ) -> Verdict {
        let d = &mut p.data_mut()[..end];
        let (head, rest) = d.split_at_mut(ihl + ESP_HEADER + IV_LEN);
        let iv: [u8; IV_LEN] = head[ihl + ESP_HEADER..].try_into().expect("8 bytes");
        let (sealed, icv) = rest.split_at_mut(rest.len() - ICV_LEN);
        let tag: [u8; ICV_LEN] = (&*icv).try_into().expect("16 bytes");
        if !self.sa.open(seq, iv, tag, sealed) {
            self.counts.auth_failures.fetch_add(1, Ordering::Relaxed);
            return Verdict::Dropped;
        }
        let n = sealed.len();
        let (pad, next) = (usize::from(sealed[n - 2]), sealed[n - 1]);
        let inner = n.checked_sub(pad + TRAILER);
        let version = sealed[0] >> 4;
        let header = match (inner, next) {
            (_, NEXT_NONE) => return Verdict::Consumed(seq, Discarded::Dummy),
            (Some(len), NEXT_IPV4) if len >= 20 && version == 4 => usize::from(sealed[0] & 15) * 4,
            (Some(len), NEXT_IPV6) if len >= 40 && version == 6 => 40,
            _ => return Verdict::Consumed(seq, Discarded::BadTrailer),
        };
        if outer_ecn == ECN_CE {
            mark_congestion(next, sealed);
        }
        let inner = inner.expect("matched Some");
        let len = p.len();
        p.take(len - end + ICV_LEN + pad + TRAILER);
        p.pull(ihl + ESP_HEADER + IV_LEN);
        debug_assert_eq!(p.len(), inner);
        p.set_network_header(0, header.min(inner));
        let d = p.data();
        if next == NEXT_IPV4 {
            let dst: [u8; 4] = d[16..20].try_into().expect("inner >= 20");
            p.set_dst_ip_anno(dst);
        } else {
            let dst: [u8; 16] = d[24..40].try_into().expect("inner >= 40");
            p.set_dst_ip6_anno(dst);
        }
        Verdict::Open(seq)
    }
}

/// The outer IPv6 header.
const OUTER6_LEN: usize = 40;

/// The ECN field's bits in the IPv4 TOS byte, and its Congestion Experienced value.
const ECN_MASK: u8 = 3;
const ECN_CE: u8 = 3;

/// Carries an outer header's Congestion Experienced mark to the inner packet at the
/// start of `inner` (an IPv4 header of at least 20 bytes, or an IPv6 one), where that
/// packet is ECN-capable (RFC 6040 4.2, RFC 4301 5.1.2.1, as Linux's tunnel mode): its
/// ECN field becomes CE, an IPv4 checksum updated incrementally (RFC 1624). A packet
/// that is not ECN-capable is left as it is (as Linux leaves it).
fn mark_congestion(next: u8, inner: &mut [u8]) {
    if next == NEXT_IPV4 {
        let ecn = inner[1] & ECN_MASK;
        if ecn == 0 || ecn == ECN_CE {
            return;
        }
        let old = u16::from_be_bytes([inner[0], inner[1]]);
        inner[1] |= ECN_CE;
        let new = u16::from_be_bytes([inner[0], inner[1]]);
        let hc = u16::from_be_bytes([inner[10], inner[11]]);
        let hc = packet::checksum::update16(hc, old, new);
        inner[10..12].copy_from_slice(&hc.to_be_bytes());
    } else {
        // IPv6: the ECN field is bits 4-5 of the second byte.
        if (inner[1] >> 4) & ECN_MASK != 0 {
            inner[1] |= ECN_CE << 4;
        }
    }
}

pub(super) struct ESPDecap {
    shared: Arc<Shared>,
    /// The batch's verdicts, kept to reuse the allocation.
    verdicts: Vec<Verdict>,
}

impl ESPDecap {
    pub(super) fn new(shared: Arc<Shared>) -> ESPDecap {
        ESPDecap {
            shared,
            verdicts: Vec::new(),
        }
    }
}

impl Element for ESPDecap {
    fn push(&mut self, _port: usize, batch: &mut PacketBatch, out: &mut Outputs<'_>, _cx: &mut Context<'_>) {
        let s = &*self.shared;
        let v = &mut self.verdicts;
        v.clear();
        // The window is consulted once for the batch before decryption and once after
        // (a number may have been taken meanwhile by another worker, or twice in this
        // batch), so decryption runs outside the lock.
        let (mut bad, mut replays, mut dummies) = (0, 0, 0);
        {
            let w = s.window();
            for p in batch.iter() {
                v.push(match s.parse(p.data()) {
                    None => {
                        bad += 1;
                        Verdict::Refused
                    }
                    Some((layout, low)) => {
                        let seq = w.full(low);
                        match w.check(seq) {
                            Ok(()) => Verdict::Checked(seq, layout),
                            Err(Stale::Replayed | Stale::TooOld) => {
                                replays += 1;
                                Verdict::Refused
                            }
                        }
                    }
                });
            }
        }
        for (p, v) in batch.iter_mut().zip(v.iter_mut()) {
            if let Verdict::Checked(seq, layout) = *v {
                *v = s.open(p, seq, layout);
            }
        }
        {
            let mut w = s.window();
            for v in v.iter_mut() {
                match *v {
                    Verdict::Open(seq) => {
                        if w.accept(seq).is_err() {
                            replays += 1;
                            *v = Verdict::Dropped;
                        }
                    }
                    Verdict::Consumed(seq, why) => {
                        let count = match (w.accept(seq), why) {
                            (Err(_), _) => &mut replays,
                            (Ok(()), Discarded::Dummy) => &mut dummies,
                            (Ok(()), Discarded::BadTrailer) => &mut bad,
                        };
                        *count += 1;
                    }
                    Verdict::Checked(..) | Verdict::Refused | Verdict::Dropped => {}
                }
            }
        }
        let c = &s.counts;
        if bad > 0 {
            c.bad.fetch_add(bad, Ordering::Relaxed);
        }
        if replays > 0 {
            c.replays.fetch_add(replays, Ordering::Relaxed);
        }
        if dummies > 0 {
            c.dummies.fetch_add(dummies, Ordering::Relaxed);
        }
        let mut i = 0;
        out.route_each(batch, |_| {
            let port = match v[i] {
                Verdict::Open(_) => 0,
                Verdict::Refused => 1,
                // (No packet is still only checked: each was opened above.)
                Verdict::Checked(..) | Verdict::Consumed(..) | Verdict::Dropped => DROP,
            };
            i += 1;
            port
        });
    }
}
