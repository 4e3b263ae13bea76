// forward.click -- minimal forwarding, the RouteBricks baseline application.
//
// Every frame received on the input leaves on the output untouched: no header is
// read or written, so what is measured is the cost of moving packets (receive,
// batch, transmit), the floor under every other application.
//
// Run it on a capture:  brickroute run conf/forward.click IN=trace.pcap OUT=copy.pcap
// Measure it:           brickroute bench pipeline --app forward --size 64 --threads 1

define($IN conf/samples/router-sample.pcap, $OUT forward-out.pcap);

FromDump($IN, STOP true) -> ToDump($OUT);
