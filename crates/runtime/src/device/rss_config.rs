//! `FromDevice` and `ToDevice`'s RSS keywords: `RSS_KEY`, `RSS_TABLE` and `RSS_RULES`
//! set an interface's RSS settings from the configuration, as the `rss_key`,
//! `rss_table` and `rss_rules` handlers set them while it runs (same forms). Several
//! elements of one interface may give a keyword, all with the same value.

use super::Method;
use classify::rss::{parse_key, parse_rules};
use classify::Reta;
use graph::args::Args;
use graph::element::BuildContext;
use graph::ConfigError;
use io::Port;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The keywords, each with its handler's form.
const KEYWORDS: [&str; 3] = ["RSS_KEY", "RSS_TABLE", "RSS_RULES"];

/// The RSS keywords an element gave.
pub(super) struct RssKeywords(Vec<(&'static str, String)>);

impl RssKeywords {
    pub(super) fn take(args: &mut Args, cx: &BuildContext) -> Result<RssKeywords, ConfigError> {
        let mut given = Vec::new();
        for kw in KEYWORDS {
            if let Some(v) = args.keyword::<String>(kw).map_err(|e| cx.error(e))? {
                given.push((kw, v));
            }
        }
        Ok(RssKeywords(given))
    }
}

/// A device's name and a keyword.
type Setting = (String, &'static str);

/// A keyword's value and the element that gave it.
struct Source {
    value: String,
    element: String,
}

/// Which element gave each keyword's value for each device.
#[derive(Default)]
pub(super) struct Given(Mutex<BTreeMap<Setting, Source>>);

impl Given {
    /// Forgets what an earlier configuration gave: a new one starts afresh.
    pub(super) fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Applies `kws` to `port` (device `dev`): refused with the reason for a port that
    /// has no RSS settings of its own, for a value in no form the handler takes, and for
    /// a value another element gave differently.
    pub(super) fn apply(
        &self,
        dev: &str,
        method: Option<Method>,
        port: &dyn Port,
        kws: &RssKeywords,
        cx: &BuildContext,
    ) -> Result<(), ConfigError> {
        for (kw, value) in &kws.0 {
            if let Err(why) = port.rss() {
                return Err(cx.error(if method == Some(Method::Packet) {
                    // An AF_PACKET interface whose program the kernel refused.
                    format!("{}: device '{}': {}", kw, dev, why)
                } else {
                    format!(
                        "{} is for interfaces opened with METHOD PACKET, which spread frames over their queues themselves; device '{}': {}",
                        kw, dev, why
                    )
                }));
            }
            let mut given = self.0.lock().unwrap_or_else(|e| e.into_inner());
            match given.get(&(dev.to_string(), *kw)) {
                Some(g) if g.value == *value => continue,
                Some(g) => {
                    return Err(cx.error(format!(
                        "{} of device '{}' differs from the one {} gave (give it once, or the same)",
                        kw, dev, g.element
                    )))
                }
                None => {}
            }
            let queues = port.queues();
            port.update_rss(&mut |s| {
                match *kw {
                    "RSS_KEY" => s.key = parse_key(value)?,
                    "RSS_TABLE" => s.reta = Reta::parse(value, queues)?,
                    _ => s.rules = parse_rules(value)?,
                }
                Ok(())
            })
            .map_err(|e| cx.error(format!("{}: {}", kw, e)))?;
            given.insert(
                (dev.to_string(), kw),
                Source {
                    value: value.clone(),
                    element: cx.name.to_string(),
                },
            );
        }
        Ok(())
    }
}
