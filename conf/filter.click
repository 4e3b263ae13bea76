// filter.click -- a firewall's forwarding path: every IPv4 packet checked and passed
// through an IPFilter, then sent on. The rules can change while the router runs (a
// write to f.config, through a ControlSocket and `brickroute ctl`); `bench pipeline
// --app filter --rules N --rule-updates R` measures the path with N more rules while
// they are rewritten R times a second (docs/PERFORMANCE.md).
//
// Run it:   brickroute run conf/filter.click -h f.program

define($IN conf/samples/router-sample.pcap, $OUT filter-out.pcap);

FromDump($IN, STOP true) -> c :: Classifier(12/0800, -);
c[0] -> Strip(14) -> CheckIPHeader
     -> f :: IPFilter(deny dst net 10.0.0.0/8, allow all)
     -> Unstrip(14) -> ToDump($OUT);
c[1] -> Discard;
