//! End-to-end tests: the embedded API server over loopback HTTP, the real informer, real
//! compiled plugins and real clients (kubectl, kube-rs). One module per area.

mod admin;
mod admission;
mod admission_ts;
mod chart;
mod compile_cache;
mod devloop;
mod example_plugins;
mod execution;
mod informer;
mod leader;
mod least_privilege;
mod namespace_selector;
mod new;
mod outbound;
mod plugin_metrics;
mod plugins;
mod polyglot;
mod polyglot_http;
mod reload_race;
mod replay;
mod retry;
mod schedules;
mod secrets;
mod shard;
mod shard_selector;
mod sources;
mod status;
mod tenancy;
mod traces;
mod waiting;
mod watches;
mod wildcard;
mod write_hostile;
mod writes;
