import Testing

/// The suites that load the shared PostgreSQL server and both cores (herds of 128 requests, 6,000
/// requests over four pools, a trim of a million rows, a partition whose bounds are measured in real time) run one test at
/// a time: run beside each other, the partition test's "every place free within 2 s" failed once
/// in CI while a herd, the fleet figure and the million-row trim ran with it.
@Suite(.serialized) enum FleetLoadTests {}
