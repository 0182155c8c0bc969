// Package bench is the harness behind `aerie bench`: named workloads in the
// spirit of the OpenMessaging Benchmark (throughput, latency at fixed rates,
// fan-out, selective delivery, catch-up after an outage), run against an
// aerie network started in-process over real loopback TCP and, with the
// natspeer build tag, against an embedded NATS server in the same run.
//
// Every system is driven through the same small Target interface, so the
// load generator, the latency bookkeeping (HdrHistogram, measured from each
// message's intended send time, so coordinated omission is accounted for)
// and the CPU accounting (getrusage over the measured window) are shared.
// Absolute figures on a shared machine drift; ratios within one run hold.
package bench
